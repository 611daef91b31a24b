"""/metrics (a token by default, the client's address read through TRUSTED_PROXIES), the queues a
user may choose (JOBS_QUEUES), and the production settings (check --deploy clean with DEBUG off,
the quick start's plain http still working)."""

import os
import subprocess
import sys

import pytest

from jobs.models import Job

from ..conftest import REPO
from ..work_trail import work_entries

PROXY = {"REMOTE_ADDR": "127.0.0.1"}


@pytest.fixture
def metrics_settings(settings):
    settings.METRICS_TOKEN = "scrape-token-1234"
    settings.METRICS_ALLOWED_IPS = []
    settings.TRUSTED_PROXIES = []
    return settings


@pytest.mark.parametrize("headers", [{}, {"HTTP_AUTHORIZATION": "Bearer "}, {"HTTP_AUTHORIZATION": "Bearer wrong"},
                                     {"HTTP_AUTHORIZATION": "scrape-token-1234"},
                                     {"HTTP_AUTHORIZATION": "Basic c2NyYXBlLXRva2VuLTEyMzQ="}])
def test_metrics_refuse_a_missing_or_wrong_token_even_from_localhost(db, client, metrics_settings, headers):
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", **headers)
    assert response.status_code == 401 and response["WWW-Authenticate"] == 'Bearer realm="metrics"'


def test_metrics_without_a_token_set_answer_nobody_by_default(db, client, metrics_settings):
    metrics_settings.METRICS_TOKEN = ""
    for address in ("127.0.0.1", "::1", "10.0.0.5"):
        response = client.get("/metrics", REMOTE_ADDR=address)
        assert response.status_code == 401 and b"METRICS_TOKEN" in response.content


@pytest.mark.postgres("the metrics are read with PostgreSQL's SQL")
def test_behind_a_trusted_proxy_the_allowed_address_is_the_clients(db, client, metrics_settings):
    """A proxy on the same host makes every REMOTE_ADDR 127.0.0.1: with the proxy in TRUSTED_PROXIES,
    the client is read from X-Forwarded-For, and a client cannot forge its way past it."""
    metrics_settings.METRICS_ALLOWED_IPS = ["127.0.0.1", "10.9.0.0/16"]
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.7", **PROXY).status_code == 200  # untrusted
    metrics_settings.TRUSTED_PROXIES = ["127.0.0.1/32"]
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.7", **PROXY).status_code == 401
    forged = client.get("/metrics", HTTP_X_FORWARDED_FOR="127.0.0.1, 203.0.113.7", **PROXY)
    assert forged.status_code == 401
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="10.9.1.2", **PROXY).status_code == 200
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.7", REMOTE_ADDR="10.9.1.2").status_code == 200


def test_the_audit_trail_records_the_client_behind_a_trusted_proxy(people, settings):
    settings.TRUSTED_PROXIES = ["127.0.0.1/32"]
    client = people.api(people.owner)
    client.post("/api/jobs/", {"name": "j", "kind": "callable", "target": "builtin.noop"}, format="json",
                HTTP_X_FORWARDED_FOR="198.51.100.4, 203.0.113.9", **PROXY)
    assert work_entries().get().remote_addr == "203.0.113.9"


@pytest.fixture
def queues(settings):
    settings.JOBS_QUEUES = {"jobs": None, "reports": ["team"], "gpu": ["ml"]}
    return settings


@pytest.mark.parametrize("queue, user", [("gpu", "owner"), ("nobody-listens", "owner"), ("reports", "outsider"),
                                         ("gpu", "staff")])
def test_a_job_on_a_queue_outside_the_users_is_a_400_on_the_field(people, queues, queue, user):
    response = people.api(getattr(people, user)).post("/api/jobs/", {
        "name": "j", "kind": "callable", "target": "builtin.noop", "queue": queue}, format="json")
    assert response.status_code == 400 and "JOBS_QUEUES" in response.json()["queue"][0]
    assert not Job.objects.exists()


def test_a_queue_of_the_users_group_is_accepted(people, queues, owned_job):
    client = people.api(people.owner)
    assert client.post("/api/jobs/", {"name": "j", "kind": "callable", "target": "builtin.noop",
                                      "queue": "reports"}, format="json").status_code == 201
    refused = client.patch(f"/api/jobs/{owned_job.pk}/", {"queue": "gpu"}, format="json")
    assert refused.status_code == 400 and Job.objects.get(pk=owned_job.pk).queue == ""


def test_the_admin_refuses_a_queue_outside_the_users(client, people, queues):
    from django.contrib.auth.models import Permission

    people.staff.user_permissions.add(*Permission.objects.filter(codename__in=["add_job", "view_job"]))
    client.force_login(people.staff)
    response = client.post("/admin/jobs/job/add/", {
        "name": "j", "kind": "callable", "target": "builtin.noop", "queue": "gpu", "schedule_type": "manual",
        "tags": "[]", "args": "[]", "kwargs": "{}", "environment": "{}", "secret_environment": "{}",
        "http_method": "GET", "http_headers": "{}", "secret_http_headers": "{}", "http_ok_statuses": "[]",
        "catchup_policy": "latest", "catchup_max": "10", "overlap_policy": "allow", "jitter_seconds": "0", "spread": "0",
        "bundle": "auto",
        "max_retries": "0", "retry_backoff_seconds": "10", "retry_backoff_max_seconds": "600",
        "timeout_seconds": "60"})
    assert "JOBS_QUEUES" in str(response.context["adminform"].form.errors["queue"])
    assert not Job.objects.exists()


def manage(*args, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "HTTPS", "SECRET_KEY")}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**base, **env})


STRONG_KEY = "k3Y-" + "x7Qp9Lm2Vb8Rt4Wz6Nc1Hd5Fg0Js3Ka" * 2


def test_check_deploy_is_clean_with_debug_off():
    result = manage("check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=STRONG_KEY,
                    ALLOWED_HOSTS="scheduler.example.com", SITE_URL="https://scheduler.example.com")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_names_what_plain_http_gives_up():
    """The control: HTTPS=false (the quick start) is not a deployment, and check --deploy says so."""
    result = manage("check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=STRONG_KEY, HTTPS="false")
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stdout + result.stderr


def test_secure_cookies_by_default_and_plain_http_for_the_quick_start():
    probe = ("from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
             "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER)")
    production = manage("shell", "-v", "0", "-c", probe, SECRET_KEY=STRONG_KEY, SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO")
    assert production.stdout.split() == ["True", "True", "True", "31536000", "('HTTP_X_FORWARDED_PROTO',", "'https')"]
    quick_start = manage("shell", "-v", "0", "-c", probe, SECRET_KEY=STRONG_KEY, HTTPS="false")
    assert quick_start.stdout.split() == ["False", "False", "False", "0", "None"]


def test_the_quick_start_logs_in_over_plain_http(client, people, settings):
    assert settings.HTTPS is False  # as the quick start and the tests run
    people.owner.set_password("owner-password-1")
    people.owner.save()
    response = client.post("/accounts/login/", {"username": "owner", "password": "owner-password-1"})
    assert response.status_code == 302 and not response.cookies["sessionid"]["secure"]
    assert client.get("/jobs/").status_code == 200


MALFORMED_BROKER_URLS = [
    ("CELERY_BROKER_URL", "redis://user:s3cr3tpw@host:notaport/0"),
    ("CELERY_BROKER_URL", "amqp://guest:s3cr3tpw@[bad"),
    ("CELERY_BROKER_URL", "redis//user:s3cr3tpw@host/0"),
    ("REDIS_URL", "redis://:s3cr3tpw@127.0.0.1:99999/0"),
    ("CELERY_BROKER_URL", "sentinel://127.0.0.1:26379;sentinel://:s3cr3tpw@127.0.0.1:port"),
]
BROKER_PROCESSES = {
    "manage.py": [sys.executable, "manage.py", "check"],
    "worker": [sys.executable, "-m", "celery", "-A", "scheduler_site", "worker", "--pool=solo", "-l", "info"],
}


@pytest.mark.parametrize("process", BROKER_PROCESSES)
@pytest.mark.parametrize(("variable", "url"), MALFORMED_BROKER_URLS)
def test_a_malformed_broker_url_stops_the_process_without_showing_its_password(variable, url, process):
    env = {key: value for key, value in os.environ.items() if key not in ("CELERY_BROKER_URL", "REDIS_URL")}
    env.update({variable: url, "CELERY_SENTINEL_MASTER_NAME": "main"})
    result = subprocess.run(BROKER_PROCESSES[process], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {variable} " in result.stderr
    assert "s3cr3tpw" not in result.stderr + result.stdout
