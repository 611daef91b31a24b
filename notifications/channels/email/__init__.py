"""Email through Django's mail backend, rendered from three templates beside this module: subject,
text and HTML."""

import smtplib
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection

from ...render import context_for
from ..base import ChannelKindSpec, TransportError, render_template


@dataclass
class Email:
    subject: str
    text: str
    html: str


def validate(config):
    recipients = config.get("recipients")
    if not isinstance(recipients, list) or not recipients or not all(
        isinstance(r, str) and "@" in r for r in recipients
    ):
        raise ValidationError('An email channel needs {"recipients": ["someone@example.com"]}.')


def render(delivery):
    context = context_for(delivery)
    return Email(subject=" ".join(render_template(__file__, "subject.txt", context).split()),
                 text=render_template(__file__, "body.txt", context),
                 html=render_template(__file__, "body.html", context))


def send(config, email):
    message = EmailMultiAlternatives(email.subject, email.text, settings.DEFAULT_FROM_EMAIL, config["recipients"],
                                     connection=get_connection(fail_silently=False))
    message.attach_alternative(email.html, "text/html")
    try:
        message.send()
    except smtplib.SMTPRecipientsRefused as exc:
        raise TransportError(f"recipients refused: {', '.join(exc.recipients)}", permanent=True) from None
    except smtplib.SMTPResponseException as exc:
        # 5xx is the server's final word; 4xx asks to try again later.
        detail = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else exc.smtp_error
        raise TransportError(f"SMTP {exc.smtp_code}: {detail}", permanent=exc.smtp_code >= 500) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise TransportError(f"could not send mail via {settings.EMAIL_HOST}:{settings.EMAIL_PORT}: {exc}") from None


CHANNEL = ChannelKindSpec(name="email", label="Email", config_example={"recipients": ["ops@example.com"]},
                          render=render, send=send, validate=validate)
