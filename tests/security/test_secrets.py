"""Secret environment values and HTTP headers: write-only everywhere a person or a file can read a
job (the API, the pages, the admin, ``jobs export``, ``jobs show``, the audit trail), encrypted in
the database, kept when the mask is sent back, and given in clear only to the run."""

import json
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from audit.models import AuditEntry
from jobs import lifecycle
from jobs.access import secrets
from jobs.kinds import command as command_kind
from jobs.kinds import http as http_kind
from jobs.kinds.base import RunContext
from jobs.models import Job

ENV_SECRET = "env-secret-value-8Jx2"
HEADER_SECRET = "Bearer header-secret-value-Qz7"
SECRETS = (ENV_SECRET, HEADER_SECRET, "header-secret-value-Qz7")


@pytest.fixture
def secret_jobs(people, settings, local_http_allowed):
    runner = people.api(people.runner)
    command = runner.post("/api/jobs/", {
        "name": "deploy", "kind": "command", "target": 'test "$TOKEN" = "$EXPECTED" && echo token-ok',
        "group": "team", "environment": {"EXPECTED": "placeholder"},
        "secret_environment": {"TOKEN": ENV_SECRET}}, format="json")
    assert command.status_code == 201, command.json()
    http = runner.post("/api/jobs/", {
        "name": "notify", "kind": "http", "target": "https://example.invalid/hook", "group": "team",
        "http_headers": {"X-Team": "ops"}, "secret_http_headers": {"Authorization": HEADER_SECRET}}, format="json")
    assert http.status_code == 201, http.json()
    return Job.objects.get(name="deploy"), Job.objects.get(name="notify")


def assert_no_secret(text, where):
    """Neither a secret value nor its ciphertext."""
    tokens = [token for job in Job.objects.all() for name in secrets.FIELDS for token in getattr(job, name).values()]
    for secret in (*SECRETS, *tokens):
        assert secret not in text, f"{secret!r} found in {where}"


def test_the_api_shows_secret_values_masked_to_everyone(people, secret_jobs):
    command, http = secret_jobs
    lifecycle.create_run(command)
    for user in (people.runner, people.teammate, people.owner):
        client = people.api(user)
        for url in ("/api/jobs/", f"/api/jobs/{command.pk}/", f"/api/jobs/{http.pk}/", "/api/runs/",
                    f"/api/runs/{command.runs.get().pk}/", "/api/schema/"):
            response = client.get(url)
            assert response.status_code == 200, url
            assert_no_secret(response.content.decode(), f"GET {url} as {user}")
    shown = people.api(people.runner).get(f"/api/jobs/{command.pk}/").json()
    assert shown["secret_environment"] == {"TOKEN": secrets.MASK}
    assert people.api(people.runner).get(f"/api/jobs/{http.pk}/").json()["secret_http_headers"] == {
        "Authorization": secrets.MASK}


def test_the_database_holds_only_ciphertext(secret_jobs, settings):
    with connection.cursor() as cursor:
        cursor.execute("SELECT CAST(secret_environment AS text), CAST(secret_http_headers AS text) FROM jobs_job")
        rows = cursor.fetchall()
    stored = " ".join(column for row in rows for column in row)
    for secret in SECRETS:
        assert secret not in stored
    token = next(json.loads(environment)["TOKEN"] for environment, _ in rows if "TOKEN" in environment)
    assert Fernet(settings.JOBS_SECRETS_KEYS[0]).decrypt(token.encode()).decode() == ENV_SECRET


def test_the_pages_and_the_admin_never_show_them(client, people, secret_jobs):
    command, http = secret_jobs
    run = lifecycle.create_run(command)
    people.runner.is_staff = people.runner.is_superuser = True  # every page, the admin's included
    people.runner.save()
    client.force_login(people.runner)
    for url in ("/", "/jobs/", f"/jobs/{command.pk}/", f"/jobs/{http.pk}/", f"/runs/{run.pk}/",
                f"/runs/{run.pk}/tail/", f"/admin/jobs/job/{command.pk}/change/", f"/admin/jobs/job/{http.pk}/change/",
                "/admin/audit/auditentry/", f"/admin/audit/auditentry/{AuditEntry.objects.first().pk}/change/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_no_secret(response.content.decode(), url)


def test_the_audit_trail_names_the_keys_only(people, secret_jobs):
    command, _ = secret_jobs
    people.api(people.runner).patch(f"/api/jobs/{command.pk}/", {"secret_environment": {"TOKEN": "rotated-9Qw"}},
                                    format="json")
    entries = list(AuditEntry.objects.values_list("changes", flat=True))
    text = json.dumps(entries)
    assert_no_secret(text, "the audit trail")
    assert "rotated-9Qw" not in text
    assert {"TOKEN": "••• (changed)"} in [e.get("secret_environment", [None, None])[1] for e in entries]


def test_export_masks_them_and_applying_the_export_keeps_them(secret_jobs, tmp_path):
    command, http = secret_jobs
    for name in ("jobs.yaml", "jobs.json"):
        call_command("jobs", "export", str(tmp_path / name), stdout=StringIO())
        text = (tmp_path / name).read_text()
        assert_no_secret(text, name)
        assert secrets.MASK in text
        out = StringIO()
        call_command("jobs", "apply", str(tmp_path / name), stdout=out)
        assert "no changes" in out.getvalue()
    shown = StringIO()
    call_command("jobs", "show", "notify", stdout=shown)
    assert_no_secret(shown.getvalue(), "jobs show")
    command.refresh_from_db()
    assert secrets.reveal(command.secret_environment) == {"TOKEN": ENV_SECRET}


def test_the_mask_keeps_the_stored_value_and_a_new_value_replaces_it(people, secret_jobs):
    command, _ = secret_jobs
    client = people.api(people.runner)
    url = f"/api/jobs/{command.pk}/"
    assert client.patch(url, {"secret_environment": {"TOKEN": secrets.MASK}, "description": "x"},
                        format="json").status_code == 200
    command.refresh_from_db()
    assert secrets.reveal(command.secret_environment) == {"TOKEN": ENV_SECRET}
    refused = client.patch(url, {"secret_environment": {"OTHER": secrets.MASK}}, format="json")
    assert refused.status_code == 400 and "keeps a stored value" in refused.json()["secret_environment"][0]
    command.refresh_from_db()
    assert secrets.reveal(command.secret_environment) == {"TOKEN": ENV_SECRET}


def test_the_run_gets_them_in_clear(secret_jobs):
    command, http = secret_jobs
    command.environment = {"EXPECTED": ENV_SECRET}
    outcome = command_kind.execute(RunContext(run_id=1, attempt=1, job=command, timeout_seconds=10))
    assert outcome.output.strip() == "token-ok"


def test_the_request_gets_them_in_clear(secret_jobs, only_outside_allowed, outside):
    _, http = secret_jobs
    http.target = f"{outside.url}/hook"
    http_kind.execute(RunContext(run_id=1, attempt=1, job=http, timeout_seconds=10))
    assert outside.hits[0]["headers"]["Authorization"] == HEADER_SECRET


def test_without_a_key_secret_values_are_refused_not_stored_in_clear(people, settings):
    settings.JOBS_SECRETS_KEYS = []
    response = people.api(people.runner).post("/api/jobs/", {
        "name": "deploy", "kind": "command", "target": "true", "secret_environment": {"TOKEN": ENV_SECRET}},
        format="json")
    assert response.status_code == 400
    assert "JOBS_SECRETS_KEYS" in response.json()["secret_environment"][0]
    assert not Job.objects.exists()


def test_rotation_encrypts_again_with_the_first_key(secret_jobs, settings):
    command, _ = secret_jobs
    old = settings.JOBS_SECRETS_KEYS[0]
    new = secrets.new_key()
    settings.JOBS_SECRETS_KEYS = [new, old]
    call_command("secrets", "rotate", stdout=StringIO())
    settings.JOBS_SECRETS_KEYS = [new]
    command.refresh_from_db()
    assert secrets.reveal(command.secret_environment) == {"TOKEN": ENV_SECRET}
    settings.JOBS_SECRETS_KEYS = [old]
    with pytest.raises(secrets.SecretsUnavailable):
        secrets.reveal(command.secret_environment)
