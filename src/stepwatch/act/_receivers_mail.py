"""The e-mail receiver: one plain-text message per notification over SMTP (STARTTLS and login
when the relay wants them)."""

from __future__ import annotations

import smtplib
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from .._redact import redact_urls
from ._notify_message import Notification
from ._receivers import DeliveryError, Retry

__all__ = ["EmailReceiver"]


@dataclass(frozen=True, slots=True)
class EmailReceiver:
    """Sends ``Notification.text()`` from ``sender`` to ``to`` through ``host:port``."""

    name: str
    host: str
    port: int
    sender: str
    to: tuple[str, ...]
    starttls: bool = False
    username: str = ""
    password: str = field(default="", repr=False)
    timeout_s: float = 10.0
    retry: Retry = Retry()

    def message(self, notification: Notification) -> EmailMessage:
        """The e-mail as sent (its subject is the notification's title)."""
        msg = EmailMessage()
        msg["Subject"] = notification.title
        msg["From"] = self.sender
        msg["To"] = ", ".join(self.to)
        msg["Date"] = formatdate(localtime=False)
        msg["Message-ID"] = make_msgid(domain=self.sender.rpartition("@")[2] or None)
        msg.set_content(notification.text())
        return msg

    def send(self, notification: Notification) -> None:
        msg = self.message(notification)
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout_s) as smtp:
                if self.starttls:
                    smtp.starttls()
                if self.username:
                    smtp.login(self.username, self.password)
                smtp.send_message(msg)
        except smtplib.SMTPResponseException as exc:
            retryable = exc.smtp_code >= 400 and exc.smtp_code < 500  # 4xx: try again later
            raise DeliveryError(
                f"{self.host}:{self.port} said {exc.smtp_code}", retryable
            ) from None
        except (smtplib.SMTPException, OSError) as exc:
            why = redact_urls(str(exc))
            raise DeliveryError(f"could not mail through {self.host}:{self.port}: {why}") from None
