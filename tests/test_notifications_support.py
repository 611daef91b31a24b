"""Real local servers for the notification tests: an SMTP server (aiosmtpd) and an HTTP server
that records requests and answers scripted status codes. No tests here."""

import email
import email.policy
import json
import socket
import threading

from aiosmtpd.controller import Controller
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.utils import timezone

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus
from notifications import channel_secrets
from notifications.models import Channel, Delivery, DeliveryStatus, Rule
from notifications.sending import send_delivery

from .local_http import LocalHTTPServer, QuietHandler

HANG_LIMIT_SECONDS = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RecordingHTTPServer(LocalHTTPServer):
    """Answers POSTs with the scripted statuses in order (then 200); "hang" answers only when
    the server stops (or after HANG_LIMIT_SECONDS)."""

    def __init__(self, script=()):
        self.script = list(script)
        self.requests = []
        self.stopping = threading.Event()
        recorder = self

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                recorder.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                answer = recorder.script.pop(0) if recorder.script else 200
                if answer == "hang":
                    recorder.stopping.wait(HANG_LIMIT_SECONDS)
                    answer = 200
                self.send_response(answer)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if answer == 200 else b"no_service")

        super().__init__(Handler)

    def __exit__(self, *exc):
        self.stopping.set()
        super().__exit__(*exc)

    def json_bodies(self):
        return [json.loads(r["body"]) for r in self.requests]


class RecordingSMTPServer:
    def __init__(self):
        self.messages = []
        self.port = free_port()
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self.settings = override_settings(
            EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend", EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=self.port, EMAIL_USE_TLS=False, EMAIL_HOST_USER="", EMAIL_HOST_PASSWORD="",
        )

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("nobody@"):
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append({"to": envelope.rcpt_tos, "subject": message["Subject"],
                              "text": message.get_body(("plain",)).get_content(),
                              "html": message.get_body(("html",)).get_content()})
        return "250 Message accepted"

    def __enter__(self):
        self.controller.start()
        self.settings.enable()
        return self

    def __exit__(self, *exc):
        self.settings.disable()
        self.controller.stop()


def make_job(name="nightly-report", **fields):
    fields = {"kind": "callable", "target": "builtin.noop", **fields}
    return save_job(Job(name=name, **fields), {"type": "manual"})


def make_run(job, status=RunStatus.RUNNING, **fields):
    now = timezone.now()
    fields = {"scheduled_for": now, "started_at": now, "worker": "w1@host", "max_attempts": 1, **fields}
    return JobRun.objects.create(job=job, status=status, **fields)


def channel_with_rule(kind, config, events, name=None, **rule):
    channel = Channel.objects.create(name=name or kind, kind=kind, config=config)
    Rule.objects.create(channel=channel, events=events, **rule)
    return channel


def send_pending(now=None):
    """What the worker would do: send every pending delivery that is due."""
    due = Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now or timezone.now())
    return [send_delivery(pk, now=now) for pk in due.order_by("pk").values_list("pk", flat=True)]


CHANNEL_PERMISSIONS = ("view", "add", "change", "delete")


def grant_channel_permissions(user, *names):
    """Give ``user`` notifications.<name>_channel for each name (all four by default)."""
    for name in names or CHANNEL_PERMISSIONS:
        user.user_permissions.add(Permission.objects.get(codename=f"{name}_channel",
                                                         content_type__app_label="notifications"))
    for cache in ("_perm_cache", "_user_perm_cache"):
        user.__dict__.pop(cache, None)
    return user


def opened_config(channel):
    """A channel's config as stored, its secret values decrypted."""
    channel.refresh_from_db()
    return channel_secrets.opened(channel.kind, channel.config)
