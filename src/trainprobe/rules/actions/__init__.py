"""What a rule does when it finds an issue: stop the training, email, text, call a webhook.

The SDK's action objects (``trainprobe.config.actions``: StopTraining, Email, SMS, Webhook,
ActionList) travel as the rule's ``action_json``; ``RuleActions.from_config`` makes them
runnable. Where messages go is configured by environment variables:

- Email: ``TRAINPROBE_SMTP_HOST``, ``TRAINPROBE_SMTP_PORT`` (default 25; 465 = TLS),
  ``TRAINPROBE_SMTP_USER``, ``TRAINPROBE_SMTP_PASSWORD``, ``TRAINPROBE_SMTP_FROM``;
- SMS: ``TRAINPROBE_SMS_GATEWAY_URL`` (an HTTP endpoint taking a POST of
  ``{"to": ..., "message": ...}``) and optionally ``TRAINPROBE_SMS_GATEWAY_TOKEN``;
- Webhook: the URL given to ``Webhook(url)``; the body is Slack-compatible (``{"text": ...}``).

StopTraining writes a stop request the trainprobe hook obeys at its next step
(``trainprobe.storage.stop_request``).
"""

from __future__ import annotations

from trainprobe.rules.actions.dispatch import RuleAction, RuleActions
from trainprobe.rules.actions.notice import Notice
from trainprobe.rules.actions.outcome import ActionOutcome
from trainprobe.rules.actions.sms_gateway import SmsAction
from trainprobe.rules.actions.smtp_email import EmailAction, SmtpSettings
from trainprobe.rules.actions.stop_training import StopTrainingAction, request_stop
from trainprobe.rules.actions.webhook import WebhookAction

__all__ = [
    "ActionOutcome",
    "EmailAction",
    "Notice",
    "RuleAction",
    "RuleActions",
    "SmsAction",
    "SmtpSettings",
    "StopTrainingAction",
    "WebhookAction",
    "request_stop",
]
