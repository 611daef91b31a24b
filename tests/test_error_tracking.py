"""Error tracking (scheduler_site.error_tracking): an exception raised while secrets sit in its
locals, the request, the extra data and its own message reaches Sentry with none of them."""

import pytest
import sentry_sdk
from django.conf import settings as django_settings
from django.test import Client
from django.urls import include, path
from sentry_sdk.transport import Transport

from scheduler_site import error_tracking

JOB_SECRET = "job-secret-env-8c1f3a"
HIDDEN_HEADER = "hidden-header-value-51e0"
CHANNEL_SECRET = "channel-webhook-token-77d2"
DB_PASSWORD = "db-password-in-url-3b9e"
AUTH_SECRET = "authorization-bearer-a4f6"
COOKIE_SECRET = "cookie-session-value-0c3d"
API_KEY = "x-api-key-value-e2b8"
QUERY_TOKEN = "query-token-value-9f71"
EXTRA_TOKEN = "extra-token-value-6a05"
SMTP_PASSWORD = "smtp-password-value-d13c"
BROKER_PASSWORD = "broker-password-value-8e44"
SECRETS = [JOB_SECRET, HIDDEN_HEADER, CHANNEL_SECRET, DB_PASSWORD, AUTH_SECRET, COOKIE_SECRET, API_KEY, QUERY_TOKEN,
           EXTRA_TOKEN, SMTP_PASSWORD, BROKER_PASSWORD]


def failing_view(request):
    secret_environment = {"API_TOKEN": JOB_SECRET}  # noqa: F841 - locals an exception's frames would carry
    hidden = {"X-Signature": HIDDEN_HEADER}  # noqa: F841 - a secret under a name no rule can know
    config = {"url": f"https://hooks.example.com/{CHANNEL_SECRET}"}  # noqa: F841
    sentry_sdk.set_extra("token", EXTRA_TOKEN)
    sentry_sdk.set_extra("where", f"postgres://app:{DB_PASSWORD}@db.internal/jobs")
    sentry_sdk.add_breadcrumb(message=f"connecting to the mail server with {SMTP_PASSWORD}")
    raise RuntimeError(f"lost postgres://app:{DB_PASSWORD}@db.internal/jobs (key {django_settings.SECRET_KEY}, "
                       f"broker {django_settings.CELERY_BROKER_URL})")


urlpatterns = [path("boom/", failing_view), path("", include("scheduler_site.urls"))]


class CapturingTransport(Transport):
    """A transport that keeps the envelopes it is given (nothing leaves the process)."""

    def __init__(self, options=None):
        super().__init__(options)
        self.envelopes = []

    def capture_envelope(self, envelope):
        self.envelopes.append(envelope)


@pytest.fixture
def sentry(settings):
    settings.ROOT_URLCONF = __name__
    settings.EMAIL_HOST_PASSWORD = SMTP_PASSWORD
    settings.CELERY_BROKER_URL = f"redis://:{BROKER_PASSWORD}@127.0.0.1:6379/0"
    transport = CapturingTransport()
    error_tracking.start("https://public@sentry.example.invalid/1", environment="test", transport=transport)
    yield transport
    sentry_sdk.get_client().close()
    # Off again for the rest of this process: no client (sentry_sdk.init() without a DSN would still
    # turn its auto-enabling integrations on, Celery's adding headers to every message).
    sentry_sdk.get_global_scope().set_client(None)


def sent(transport):
    return b"".join(envelope.serialize() for envelope in transport.envelopes).decode("utf-8", "replace")


def test_a_failing_request_reaches_sentry_with_none_of_its_secrets(db, sentry):
    response = Client(raise_request_exception=False).get(
        f"/boom/?token={QUERY_TOKEN}&page=2", HTTP_AUTHORIZATION=f"Bearer {AUTH_SECRET}",
        HTTP_COOKIE=f"sessionid={COOKIE_SECRET}", HTTP_X_API_KEY=API_KEY)
    assert response.status_code == 500
    sentry_sdk.flush()

    text = sent(sentry)
    assert "RuntimeError" in text and "lost postgres://app:" in text  # the event went, scrubbed
    assert "failing_view" in text  # with its stack
    leaked = [secret for secret in [*SECRETS, django_settings.SECRET_KEY] if secret in text]
    assert leaked == []


def test_the_scrubber_replaces_secret_values_and_url_passwords_wherever_they_are(settings):
    settings.EMAIL_HOST_PASSWORD = SMTP_PASSWORD
    event = {"message": f"smtp said no to {SMTP_PASSWORD}", "extra": {"dsn": ["amqp://u:pw-123456@rabbit/vh"]},
             "level": "error", "count": 3}
    scrubbed = error_tracking.scrub(event)
    assert scrubbed == {"message": "smtp said no to [Filtered]", "extra": {"dsn": ["amqp://u:[Filtered]@rabbit/vh"]},
                        "level": "error", "count": 3}
