"""Error tracking (Sentry): ``SENTRY_DSN`` turns on sentry-sdk with its Django and Celery
integrations (settings.py calls ``start``; unset, sentry_sdk is never imported).

Nothing secret leaves the process. This service holds decrypted secrets in ordinary variables
under any name (a job's secret headers and environment, a channel's opened configuration), so:

- no local variables are sent (``include_local_variables=False``): a name-based rule could not
  find them, and an exception's frames would carry them;
- no request bodies (``max_request_body_size="never"``: a job's or a channel's secrets are posted
  in them), no personal data (``send_default_pii=False``: no cookies, no user, no IP);
- what is left goes through sentry-sdk's ``EventScrubber`` (values under names such as
  password, secret, token, authorization, cookie, api_key...: request headers, extra, contexts,
  breadcrumbs), with this service's own names added, then through ``scrub``: the values of the
  service's secrets (SECRET_KEY, the database's, the broker's and the mail server's passwords, the
  secrets' encryption keys, the metrics token...) and any password in a URL are replaced wherever
  they appear in a string (a message, an exception's text, a breadcrumb).

``tests/test_error_tracking.py`` sends an event through a fake transport and finds none of them.
"""

import re

FILTERED = "[Filtered]"
# More names whose values are secret, besides sentry-sdk's DEFAULT_DENYLIST.
DENYLIST = [
    "secret_environment", "secret_http_headers", "secret_key", "jobs_secrets_keys", "metrics_token",
    "broker_url", "database_url", "redis_url", "celery_broker_url", "celery_result_backend", "dsn",
    "webhook_url", "url_with_token", "smtp_password", "email_host_password", "flower_basic_auth",
    "admin_password", "private_key", "signing_key", "bearer", "x-api-key", "x_api_key",
    "otel_exporter_otlp_headers", "config",
]
URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@\s]*:)[^@/\s]+(?P<tail>@)")
SETTINGS_SECRETS = ("SECRET_KEY", "EMAIL_HOST_PASSWORD", "METRICS_TOKEN", "FLOWER_BASIC_AUTH", "OIDC_RP_CLIENT_SECRET")
# A job that fails is its run's outcome (recorded on the run, notified by the rules), not an error of
# the service: the worker's task raises it so that Celery counts the task as failed.
JOB_OUTCOMES = ["jobs.kinds.base.JobFailed", "jobs.kinds.base.JobTimedOut"]


def start(dsn, environment="production", sample_rate=1.0, transport=None):
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration
    from sentry_sdk.scrubber import DEFAULT_DENYLIST, EventScrubber

    sentry_sdk.init(
        dsn=dsn, environment=environment, sample_rate=sample_rate, transport=transport,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False, include_local_variables=False, max_request_body_size="never",
        ignore_errors=JOB_OUTCOMES,
        event_scrubber=EventScrubber(denylist=DEFAULT_DENYLIST + DENYLIST, recursive=True),
        before_send=scrub, before_send_transaction=scrub, before_breadcrumb=scrub,
    )


def secret_values():
    """The values of the service's own secrets, as they could appear in a string."""
    from django.conf import settings

    values = [getattr(settings, name, "") for name in SETTINGS_SECRETS]
    values += [database.get("PASSWORD") for database in settings.DATABASES.values()]
    values += list(getattr(settings, "JOBS_SECRETS_KEYS", None) or [])
    for url in (getattr(settings, "CELERY_BROKER_URL", ""), getattr(settings, "CELERY_RESULT_BACKEND", "")):
        match = URL_PASSWORD.search(url or "")
        if match:
            values.append(url[match.end("head"):match.start("tail")])
    # Long ones first, so that a secret containing another is replaced whole.
    return sorted({str(value) for value in values if value and len(str(value)) >= 4}, key=len, reverse=True)


def scrub(event, hint=None):
    """``before_send``: the event with every secret value and URL password replaced."""
    secrets = secret_values()

    def clean(value):
        if isinstance(value, str):
            for secret in secrets:
                value = value.replace(secret, FILTERED)
            return URL_PASSWORD.sub(rf"\g<head>{FILTERED}\g<tail>", value)
        if isinstance(value, dict):
            return {key: clean(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(clean(item) for item in value)
        return value

    return clean(event)
