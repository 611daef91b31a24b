"""Email through Django's mail backend, rendered from three templates: subject, text and HTML."""

import smtplib

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string

from ..render import context_for
from . import TransportError


def send(config, delivery):
    context = context_for(delivery)
    subject = " ".join(render_to_string("notifications/email_subject.txt", context).split())
    text = render_to_string("notifications/email_body.txt", context)
    html = render_to_string("notifications/email_body.html", context)
    message = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, config["recipients"],
                                     connection=get_connection(fail_silently=False))
    message.attach_alternative(html, "text/html")
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
