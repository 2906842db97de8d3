"""The Webhook action: POST the notice as JSON to a URL (Slack-compatible).

The body is ``{"text": "<the message>", "trainprobe": {rule, status, step, trial_path,
evidence}}``: Slack's incoming webhooks show ``text``; other receivers can read the details.
"""

from __future__ import annotations

from trainprobe.rules.actions.http_post import post_json
from trainprobe.rules.actions.notice import Notice

__all__ = ["WebhookAction"]


class WebhookAction:
    """POSTs the notice to ``url``."""

    kind = "webhook"

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url
        self.timeout = timeout

    @property
    def target(self) -> str:
        """The URL."""
        return self.url

    def invoke(self, notice: Notice) -> str:
        """POST the notice; raises OSError when the receiver fails or cannot be reached."""
        payload = {"text": notice.text(), "trainprobe": notice.to_json()}
        return f"receiver answered {post_json(self.url, payload, timeout=self.timeout)}"
