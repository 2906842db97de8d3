"""The SMS action: send a text message through an HTTP gateway the user configures.

``TRAINPROBE_SMS_GATEWAY_URL`` (required) receives a POST of ``{"to": "+14155550100",
"message": "..."}`` (JSON); ``TRAINPROBE_SMS_GATEWAY_TOKEN``, when set, is sent as
``Authorization: Bearer <token>``. Any 2xx answer counts as sent.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainprobe import settings
from trainprobe.rules.actions.http_post import post_json
from trainprobe.rules.actions.notice import Notice

__all__ = ["SmsAction", "gateway_from_environment"]


def gateway_from_environment(
    environ: Mapping[str, str] | None = None,
) -> tuple[str, dict[str, str]]:
    """(URL, headers) of the SMS gateway; ValueError saying what to set when it is missing."""
    url = settings.SMS_GATEWAY_URL.get(environ)
    if not url:
        raise ValueError(
            "no SMS gateway configured: set TRAINPROBE_SMS_GATEWAY_URL to an HTTP endpoint that "
            'takes a POST of {"to": ..., "message": ...} (and TRAINPROBE_SMS_GATEWAY_TOKEN if '
            "it needs a bearer token)"
        )
    token = settings.SMS_GATEWAY_TOKEN.get(environ)
    return url, ({"Authorization": f"Bearer {token}"} if token else {})


class SmsAction:
    """Texts the notice's summary to ``phone_number``."""

    kind = "sms"

    def __init__(self, phone_number: str, timeout: float = 10.0) -> None:
        self.phone_number = phone_number
        self.timeout = timeout

    @property
    def target(self) -> str:
        """The phone number."""
        return self.phone_number

    def invoke(self, notice: Notice) -> str:
        """Send the text; raises ValueError (not configured) or OSError (gateway failed)."""
        url, headers = gateway_from_environment()
        payload = {"to": self.phone_number, "message": notice.short_text()}
        answer = post_json(url, payload, headers=headers, timeout=self.timeout)
        return f"gateway answered {answer}"
