"""The audit trail: every create, change, pause, resume, delete, run-now, cancel and backfill of a
job, from the admin, the pages, the API and the command line, recorded once with who, when, from
where and what changed; shown on the job page and in the admin; pruned by its own retention
(tests/security/test_audit_trail.py has the rest: people, tokens, the API, the chain)."""

import re
from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from audit import retention
from audit.models import AuditEntry
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun

from .test_admin import act, change_data, form_data

pytestmark = pytest.mark.django_db

DAY = "2026-11-20T00:00:00Z"
TWO_HOURS_LATER = "2026-11-20T02:00:00Z"


def trail(job_name=None):
    entries = AuditEntry.objects.filter(subject="job").order_by("created_at", "id")
    if job_name:
        entries = entries.filter(job_name=job_name)
    return [(e.action, e.actor_name, e.source) for e in entries]


def hourly(name, **fields):
    fields = {"kind": "callable", "target": "builtin.noop", **fields}
    return save_job(Job(name=name, **fields), {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})


def test_every_api_action_is_recorded_once_with_its_user_address_and_diff(people):
    client = people.client(people.owner)
    created = client.post("/api/jobs/", {"name": "report", "kind": "callable", "target": "builtin.noop",
                                         "schedule": {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"}},
                          format="json").json()
    url = f"/api/jobs/{created['id']}/"
    client.patch(url, {"max_retries": 3, "schedule": {"type": "interval", "every_seconds": 60}}, format="json")
    client.patch(url, {"max_retries": 3}, format="json")  # changes nothing: no entry
    client.post(url + "pause/")
    client.post(url + "resume/")
    run_id = client.post(url + "run/").json()["id"]
    client.post(f"/api/runs/{run_id}/cancel/")
    client.post(f"/api/runs/{run_id}/cancel/")  # already cancelled: nothing happened, no entry
    client.post(url + "backfill/", {"start": DAY, "end": TWO_HOURS_LATER, "dry_run": True}, format="json")
    client.post(url + "backfill/", {"start": DAY, "end": TWO_HOURS_LATER}, format="json")
    client.delete(url)

    assert trail() == [(action, "owner", "api") for action in
                       ("create", "change", "pause", "resume", "run_now", "cancel", "backfill", "delete")]
    entries = {e.action: e for e in AuditEntry.objects.filter(subject="job")}
    assert entries["change"].changes == {
        "max_retries": [0, 3], "schedule": [{"type": "cron", "cron": "0 * * * *", "timezone": "UTC"},
                                            {"type": "interval", "every_seconds": 60}]}
    assert entries["create"].changes["name"] == [None, "report"]
    assert entries["create"].actor == people.owner
    assert entries["create"].remote_addr == "127.0.0.1"
    assert entries["cancel"].detail == entries["run_now"].detail == f"run #{run_id}"
    assert entries["backfill"].detail.startswith("120 run(s) for the slots from 2026-11-20T00:00:00+00:00")
    assert entries["delete"].changes["name"] == ["report", None]
    assert entries["delete"].job is None and entries["delete"].job_name == "report"  # outlives the job


def test_secret_values_never_reach_the_trail(people):
    client = people.client(people.staff)
    job_id = client.post("/api/jobs/", {"name": "with-secrets", "kind": "http", "target": "https://example.org/",
                                        "http_headers": {"Authorization": "Bearer s3cr3t"}}, format="json").json()["id"]
    client.patch(f"/api/jobs/{job_id}/", {"http_headers": {"Authorization": "Bearer n3w", "X-Team": "ops"}},
                 format="json")

    change = AuditEntry.objects.get(subject="job", action="change")
    assert change.changes == {"http_headers": [{"Authorization": "•••"},
                                               {"Authorization": "••• (changed)", "X-Team": "•••"}]}
    assert "s3cr3t" not in str(list(AuditEntry.objects.values_list("changes", flat=True)))


def test_every_page_action_is_recorded_once(people):
    job = hourly("paged", owner=people.owner)
    client = Client(REMOTE_ADDR="10.1.2.3")
    client.force_login(people.owner)
    client.post(f"/jobs/{job.pk}/pause/")
    client.post(f"/jobs/{job.pk}/resume/")
    client.post(f"/jobs/{job.pk}/run/")
    run = JobRun.objects.get(job=job)
    client.post(f"/runs/{run.pk}/cancel/")
    client.post(f"/jobs/{job.pk}/backfill/", {"from": "2026-11-20T00:00", "to": "2026-11-20T03:00"})  # preview
    client.post(f"/jobs/{job.pk}/backfill/", {"from": "2026-11-20T00:00", "to": "2026-11-20T03:00", "confirm": "1"})

    assert trail("paged") == [(action, "owner", "page") for action in
                              ("pause", "resume", "run_now", "cancel", "backfill")]
    assert set(AuditEntry.objects.filter(subject="job").values_list("remote_addr", flat=True)) == {"10.1.2.3"}

    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert page.count("<td>owner</td>") == 5
    assert "3 run(s) for the slots from" in page


def test_every_admin_action_is_recorded_once(admin_client):
    admin_client.post(reverse("admin:jobs_job_add"), form_data(name="admin-made"))
    job = Job.objects.get(name="admin-made")
    assert job.owner.username == "admin"  # whoever makes a job owns it
    response = admin_client.post(reverse("admin:jobs_job_change", args=[job.pk]),  # the form as the page shows it
                                 change_data(0, name="admin-made", description="now documented", owner=job.owner_id))
    assert response.status_code == 302
    jobs_url = reverse("admin:jobs_job_changelist")
    act(admin_client, jobs_url, "pause_selected", [job])
    act(admin_client, jobs_url, "resume_selected", [job])
    act(admin_client, jobs_url, "run_selected_now", [job])
    act(admin_client, reverse("admin:jobs_jobrun_changelist"), "cancel_selected", JobRun.objects.filter(job=job))
    page = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    whole_trail = admin_client.get(reverse("admin:audit_auditentry_changelist") + f"?job__id__exact={job.pk}")
    admin_client.post(reverse("admin:jobs_job_delete", args=[job.pk]), {"post": "yes"})

    assert trail("admin-made") == [(action, "admin", "admin") for action in
                                   ("create", "change", "pause", "resume", "run_now", "cancel", "delete")]
    assert AuditEntry.objects.get(subject="job", action="change").changes == {"description": ["", "now documented"]}
    assert "<code>description</code>:  → now documented" in page
    assert whole_trail.status_code == 200
    assert "6 audit entries" in whole_trail.content.decode()
    listing = admin_client.get(reverse("admin:audit_auditentry_changelist") + "?subject__exact=job").content.decode()
    assert "7 audit entries" in listing


def test_admin_clones_and_bulk_deletes_are_recorded_once_per_job(admin_client):
    first, second = hourly("first"), hourly("second")
    jobs_url = reverse("admin:jobs_job_changelist")
    act(admin_client, jobs_url, "clone_selected", [first, second])
    copies = list(Job.objects.filter(name__endswith="(copy)").order_by("name"))
    response = admin_client.post(jobs_url, {"action": "delete_selected", "post": "yes",
                                            ACTION_CHECKBOX_NAME: [job.pk for job in copies]})

    assert response.status_code == 302
    assert trail("first (copy)") == [("create", "admin", "admin"), ("delete", "admin", "admin")]
    assert trail("second (copy)") == [("create", "admin", "admin"), ("delete", "admin", "admin")]
    assert AuditEntry.objects.filter(job_name="first (copy)", action="create").get().detail == "cloned from first"
    assert sorted(Job.objects.values_list("name", flat=True)) == ["first", "second"]
    assert trail("first") == trail("second") == []


def test_every_command_line_action_is_recorded_once(tmp_path):
    job = hourly("from-the-shell")
    out = StringIO()
    call_command("jobs", "pause", "from-the-shell", stdout=out)
    call_command("jobs", "resume", "from-the-shell", stdout=out)
    call_command("jobs", "run", "from-the-shell", stdout=out)
    run = JobRun.objects.get(job=job)
    call_command("runs", "cancel", str(run.pk), stdout=out)
    call_command("runs", "cancel", str(run.pk), stdout=out)  # already cancelled: no entry
    call_command("jobs", "backfill", "from-the-shell", "--from", DAY, "--to", TWO_HOURS_LATER, stdout=out)
    spec = tmp_path / "jobs.yaml"
    spec.write_text("jobs:\n- name: from-the-shell\n  kind: callable\n  target: builtin.noop\n  max_retries: 2\n"
                    "  schedule: {type: cron, cron: '0 * * * *', timezone: UTC}\n"
                    "- name: new-one\n  kind: callable\n  target: builtin.noop\n")
    call_command("jobs", "apply", str(spec), stdout=out)
    spec.write_text("jobs:\n- name: new-one\n  kind: callable\n  target: builtin.noop\n")
    call_command("jobs", "apply", str(spec), "--prune", stdout=out)

    actions = [action for action, _, source in trail("from-the-shell") if source == "cli"]
    assert actions == ["pause", "resume", "run_now", "cancel", "backfill", "change", "delete"]
    assert f"Run {run.pk} is already cancelled; nothing changed." in out.getvalue()
    assert [action for action, _, _ in trail("new-one")] == ["create"]
    entry = AuditEntry.objects.get(subject="job", action="change")
    assert entry.changes == {"max_retries": [0, 2]}
    assert entry.actor_name.endswith("(OS user)") and entry.remote_addr
    assert Job.objects.filter(pk=job.pk).exists() is False


def test_the_trail_is_pruned_by_its_own_retention(people):
    AuditEntry.objects.all().delete()  # the trail starts here, with the old entry first
    job = hourly("old-and-new", owner=people.owner)
    client = people.client(people.owner)
    with time_machine.travel(timezone.now() - timedelta(days=40)):
        client.post(f"/api/jobs/{job.pk}/pause/")
    client.post(f"/api/jobs/{job.pk}/resume/")

    assert retention.prune(timezone.now() - timedelta(days=30), batch=1) == 1
    assert trail("old-and-new") == [("resume", "owner", "api")]


def test_the_runs_retention_pass_prunes_the_trail_by_its_own_setting(people, settings):
    from jobs.operations import retention as run_retention

    settings.JOBS_RETENTION_DAYS, settings.AUDIT_RETENTION_DAYS = 30, 60
    AuditEntry.objects.all().delete()
    job = hourly("kept-longer-than-runs", owner=people.owner)
    client = people.client(people.owner)
    for days, path in ((61, "pause"), (31, "resume")):
        with time_machine.travel(timezone.now() - timedelta(days=days)):
            client.post(f"/api/jobs/{job.pk}/{path}/")

    assert run_retention.prune(dry_run=True).audit_entries == 0
    assert run_retention.prune().audit_entries == 1
    assert trail("kept-longer-than-runs") == [("resume", "owner", "api")]


def test_a_user_sees_only_the_trail_of_jobs_they_can_see(people):
    people.client(people.owner).post(f"/api/jobs/{people.job.pk}/pause/")
    teammate, outsider = Client(), Client()
    teammate.force_login(people.teammate)
    outsider.force_login(people.outsider)
    assert "<td>owner</td>" in teammate.get(f"/jobs/{people.job.pk}/").content.decode()
    assert outsider.get(f"/jobs/{people.job.pk}/").status_code == 404
    not_staff = Client()
    not_staff.force_login(User.objects.create_user("plain"))
    assert not_staff.get(reverse("admin:audit_auditentry_changelist")).status_code == 302


def test_a_create_entry_lists_what_was_set_not_every_field(people):
    client = APIClient()
    client.force_authenticate(people.runner)  # may make command jobs
    created = client.post("/api/jobs/", {"name": "backup", "kind": "command", "target": "tar czf /tmp/b.tgz /srv",
                                         "timeout_seconds": 600, "schedule": {"type": "interval", "every_seconds": 3600}},
                          format="json")
    assert created.status_code == 201, created.json()
    entry = AuditEntry.objects.get(job_name="backup", action="create")
    assert set(entry.changes) == {"name", "kind", "target", "schedule", "timeout_seconds", "owner"}
    assert entry.changes["timeout_seconds"] == [None, 600]


def test_who_is_not_staff_sees_neither_addresses_nor_os_users_in_the_trail(people):
    people.client(people.owner).post(f"/api/jobs/{people.job.pk}/pause/", REMOTE_ADDR="203.0.113.7")
    call_command("jobs", "resume", people.job.name, stdout=StringIO())
    call_command("jobs", "--as", "owner", "pause", people.job.name, stdout=StringIO())
    host = AuditEntry.objects.get(action="resume").remote_addr
    os_user = AuditEntry.objects.get(action="resume").actor_name
    assert host and os_user.endswith("(OS user)")

    pages = {}
    for user in (people.owner, people.teammate, people.staff):
        client = Client()
        client.force_login(user)
        pages[user.username] = client.get(f"/jobs/{people.job.pk}/").content.decode()
    for name in ("owner", "teammate"):
        # (The host's name may be as short as "vm": the page's random CSRF token held it once.)
        shown = re.sub(r'(value|content)="[^"]*"', "", pages[name])
        assert "203.0.113.7" not in shown and host not in shown
        assert "(OS user)" not in pages[name]
        assert "<td>an operator</td>" in pages[name] and "<td>owner</td>" in pages[name]
    assert "203.0.113.7" in pages["staff"] and host in pages["staff"]
    assert f"<td>{os_user}</td>" in pages["staff"] and f"<td>owner ({os_user})</td>" in pages["staff"]
