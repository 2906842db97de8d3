"""The Email action: send the notice through an SMTP server the user configures.

Configured by environment variables (read when the action runs):

- ``TRAINPROBE_SMTP_HOST`` (required) and ``TRAINPROBE_SMTP_PORT`` (default 25; 465 means
  SMTP over TLS from the start);
- ``TRAINPROBE_SMTP_USER`` and ``TRAINPROBE_SMTP_PASSWORD``: log in when a user is given;
- ``TRAINPROBE_SMTP_FROM``: the sender (default ``trainprobe@<this host's name>``).

STARTTLS is used whenever the server offers it.
"""

from __future__ import annotations

import smtplib
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import EmailMessage

from trainprobe import settings
from trainprobe.rules.actions.notice import Notice

__all__ = ["EmailAction", "SmtpSettings"]

_DEFAULT_PORT = 25
_IMPLICIT_TLS_PORT = 465


@dataclass(frozen=True)
class SmtpSettings:
    """Where and how to send email."""

    host: str
    port: int = _DEFAULT_PORT
    user: str | None = None
    password: str | None = None
    sender: str = ""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SmtpSettings:
        """The settings from the TRAINPROBE_SMTP_* variables; ValueError saying what to set
        when they are missing or wrong."""
        host = settings.SMTP_HOST.get(environ)
        if not host:
            raise ValueError(
                "no SMTP server configured: set TRAINPROBE_SMTP_HOST (and TRAINPROBE_SMTP_PORT, "
                "TRAINPROBE_SMTP_USER, TRAINPROBE_SMTP_PASSWORD, TRAINPROBE_SMTP_FROM as needed)"
            )
        return cls(
            host=host,
            port=settings.SMTP_PORT.get(environ),
            user=settings.SMTP_USER.get(environ) or None,
            password=settings.SMTP_PASSWORD.get(environ) or None,
            sender=settings.SMTP_FROM.get(environ) or f"trainprobe@{socket.gethostname()}",
        )


class EmailAction:
    """Emails the notice to ``address``."""

    kind = "email"

    def __init__(
        self, address: str, settings: SmtpSettings | None = None, timeout: float = 10.0
    ) -> None:
        self.address = address
        self.settings = settings
        self.timeout = timeout

    @property
    def target(self) -> str:
        """The recipient."""
        return self.address

    def invoke(self, notice: Notice) -> str:
        """Send the email; raises ValueError (not configured) or OSError/SMTPException."""
        settings = self.settings or SmtpSettings.from_environment()
        message = EmailMessage()
        message["Subject"] = notice.subject
        message["From"] = settings.sender
        message["To"] = self.address
        message.set_content(notice.text() + "\n")
        smtp: smtplib.SMTP
        if settings.port == _IMPLICIT_TLS_PORT:
            smtp = smtplib.SMTP_SSL(settings.host, settings.port, timeout=self.timeout)
        else:
            smtp = smtplib.SMTP(settings.host, settings.port, timeout=self.timeout)
        with smtp:
            smtp.ehlo()
            if settings.port != _IMPLICIT_TLS_PORT and smtp.has_extn("starttls"):
                smtp.starttls()
                smtp.ehlo()
            if settings.user:
                smtp.login(settings.user, settings.password or "")
            smtp.send_message(message)
        return f"sent through {settings.host}:{settings.port}"
