"""The audit trail of everything, read and verified: logins, failed logins and logouts, tokens made
and revoked (pages, API, command line), users, groups, memberships and permissions are recorded;
``GET /api/audit/`` and ``jobsctl audit`` show each user only what they may see; the entries are
hash-chained and ``manage.py audit verify`` names the first one changed or missing; the trail is
kept for AUDIT_RETENTION_DAYS, apart from the runs."""

import json
import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from audit import trail
from audit.models import Action, AuditEntry, Source, Subject
from jobs import lifecycle
from jobs.access import tokens as access
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, Limit
from workflows.models import Workflow

from .conftest import member_of

PASSWORD = "a-long-password-of-owners"
ADDRESS = "198.51.100.23"


def listing(client, **params):
    answer = client.get("/api/audit/", params)
    assert answer.status_code == 200, answer.content
    return answer.json()["results"]


def about(entries):
    return {(entry["subject"], entry["name"], entry["action"]) for entry in entries}


def verify():
    out = StringIO()
    call_command("audit", "verify", stdout=out)
    return out.getvalue()


def test_a_user_of_another_team_sees_none_of_a_teams_entries(people, owned_job):
    people.owner.set_password(PASSWORD)
    people.owner.save()
    Client().post("/accounts/login/", {"username": "owner", "password": PASSWORD}, REMOTE_ADDR=ADDRESS)
    people.api(people.owner).post(f"/api/jobs/{owned_job.pk}/pause/", REMOTE_ADDR=ADDRESS)
    flow = Workflow.objects.create(name="owners-flow", owner=people.owner, group=people.team)
    people.api(people.owner).patch(f"/api/workflows/{flow.pk}/", {"description": "nightly"}, format="json")
    outsiders_job = save_job(Job(name="outsiders-job", kind="callable", target="builtin.noop",
                                 owner=people.outsider, group=people.others), {"type": "manual"})
    people.api(people.outsider).post(f"/api/jobs/{outsiders_job.pk}/pause/")

    # Each sees their own account's entries (made, joined their group) and their team's work, no more.
    outsider = about(listing(people.api(people.outsider)))
    assert outsider == {("job", "outsiders-job", "pause"), ("user", "outsider", "create"), ("user", "outsider", "change")}
    teammate = listing(people.api(people.teammate))
    assert about(teammate) == {("job", "owners-job", "pause"), ("workflow", "owners-flow", "change"),
                               ("user", "teammate", "create"), ("user", "teammate", "change")}
    assert {entry["address"] for entry in teammate} == {""}  # an address is for staff
    owner = about(listing(people.api(people.owner)))
    assert {("user", "owner", "login"), ("job", "owners-job", "pause"), ("workflow", "owners-flow", "change")} <= owner
    assert not {entry for entry in owner if "outsider" in entry[1]}
    staff = listing(people.api(people.staff), actor="owner")
    assert {("user", "owner", "login"), ("job", "owners-job", "pause")} <= about(staff)
    assert {entry["address"] for entry in staff if entry["action"] in ("login", "pause")} == {ADDRESS}


def test_a_teams_limits_calendars_and_channels_are_in_its_trail_and_no_one_elses(people):
    owner, outsider = people.api(people.owner), people.api(people.outsider)
    assert owner.post("/api/limits/", {"key": "owners-limit", "max_running": 2, "group": people.team.name},
                      format="json").status_code == 201
    assert owner.post("/api/calendars/", {"name": "owners-days", "dates": ["2026-12-24"], "group": people.team.name},
                      format="json").status_code == 201
    assert outsider.post("/api/limits/", {"key": "outsiders-limit", "max_running": 1},
                         format="json").status_code == 201
    Limit.objects.create(key="everyones-limit", max_running=5, shared=True)
    trail.record_about(Subject.LIMIT, "everyones-limit", Action.CHANGE, Source.CLI, actor_name="root (OS user)")

    teammate = {entry for entry in about(listing(people.api(people.teammate))) if entry[0] != "user"}
    assert teammate == {("limit", "owners-limit", "create"), ("calendar", "owners-days", "create"),
                        ("limit", "everyones-limit", "change")}
    outsiders = {entry for entry in about(listing(outsider)) if entry[0] != "user"}
    assert outsiders == {("limit", "outsiders-limit", "create"), ("limit", "everyones-limit", "change")}


def test_the_filters_narrow_the_trail_and_a_bad_one_answers_400_naming_it(people, owned_job):
    client = people.api(people.owner)
    with time_machine.travel(timezone.now() - timedelta(days=2)):
        client.post(f"/api/jobs/{owned_job.pk}/pause/")
    client.post(f"/api/jobs/{owned_job.pk}/resume/")
    access_token = access.create(people.owner)[0]
    client.delete(f"/api/tokens/{access_token.token_key}/")
    staff = people.api(people.staff)

    assert [e["action"] for e in listing(staff, subject="job")] == ["resume", "pause"]  # newest first
    assert [e["name"] for e in listing(staff, action="revoke")] == ["owner"]
    assert [e["action"] for e in listing(staff, subject="job", since=(timezone.now() - timedelta(days=1)).isoformat())
            ] == ["resume"]
    assert {e["actor"] for e in listing(staff, actor="owner")} == {"owner"}
    assert listing(staff, actor="nobody-at-all") == []
    for field, value in (("subject", "jobz"), ("action", "explode"), ("since", "yesterday-ish"), ("actor", "a\x00b")):
        answer = staff.get("/api/audit/", {field: value})
        assert answer.status_code == 400 and field in answer.json(), (field, answer.content)


def test_logins_failed_logins_and_logouts_are_recorded_with_the_address_never_the_password(people):
    people.owner.set_password(PASSWORD)
    people.owner.save()
    client = Client(REMOTE_ADDR=ADDRESS)
    client.post("/accounts/login/", {"username": "owner", "password": "wrong-guess-123"})
    client.post("/accounts/login/", {"username": "owner", "password": PASSWORD})
    client.post("/accounts/logout/")

    entries = list(AuditEntry.objects.filter(subject="user", job_name="owner", action__in=["login", "login_failed",
                                                                                           "logout"]).order_by("id"))
    assert [(e.action, e.actor_name, e.source, e.remote_addr) for e in entries] == [
        ("login_failed", "owner", "page", ADDRESS), ("login", "owner", "page", ADDRESS),
        ("logout", "owner", "page", ADDRESS)]
    everything = json.dumps([[e.changes, e.detail, e.job_name, e.actor_name] for e in AuditEntry.objects.all()])
    assert "wrong-guess-123" not in everything and PASSWORD not in everything


def test_tokens_made_and_revoked_from_the_pages_the_api_and_the_command_line_are_recorded(people):
    pages = Client(REMOTE_ADDR=ADDRESS)
    pages.force_login(people.owner)
    pages.post("/accounts/tokens/new/")
    by_page = access.of_user(people.owner).get()
    pages.post(f"/accounts/tokens/{by_page.token_key}/revoke/")
    out = StringIO()
    call_command("tokens", "create", "owner", stdout=out, stderr=StringIO())
    key = out.getvalue().strip()
    made_by_cli = access.of_user(people.owner).get().token_key
    assert people.api(people.owner).delete(f"/api/tokens/{made_by_cli}/").status_code == 204
    call_command("tokens", "create", "owner", stdout=StringIO(), stderr=StringIO())
    call_command("tokens", "revoke", access.of_user(people.owner).get().token_key, stdout=StringIO())

    entries = AuditEntry.objects.filter(subject="token").order_by("id")
    assert [(e.job_name, e.action, e.source) for e in entries] == [
        ("owner", "create", "page"), ("owner", "revoke", "page"), ("owner", "create", "cli"),
        ("owner", "revoke", "api"), ("owner", "create", "cli"), ("owner", "revoke", "cli")]
    assert entries[0].detail.startswith(f"token {by_page.token_key}, expires ") and entries[0].remote_addr == ADDRESS
    assert entries[3].detail == f"token {made_by_cli}" and entries[3].actor == people.owner
    assert entries[2].actor_name.endswith("(OS user)")
    assert not any(key in e.detail for e in entries)  # the prefix, never the key
    assert about(listing(people.api(people.owner), subject="token")) == {("token", "owner", "create"),
                                                                          ("token", "owner", "revoke")}
    assert listing(people.api(people.teammate), subject="token") == []


def test_changes_to_users_groups_memberships_and_permissions_are_recorded_with_who_made_them(people, admin_client):
    permission = Permission.objects.get(codename="run_command_jobs")
    start = AuditEntry.objects.order_by("-id").values_list("id", flat=True).first()
    made = admin_client.post("/admin/auth/user/add/", {"username": "newcomer", "usable_password": "true",
                                                        "password1": PASSWORD, "password2": PASSWORD})
    assert made.status_code == 302, made.content
    newcomer = User.objects.get(username="newcomer")
    group = admin_client.post("/admin/auth/group/add/", {"name": "team-b", "permissions": [permission.pk]})
    assert group.status_code == 302
    changed = admin_client.post(f"/admin/auth/user/{newcomer.pk}/change/", {
        "username": "newcomer", "is_active": "on", "groups": [people.team.pk, Group.objects.get(name="team-b").pk],
        "user_permissions": [permission.pk], "date_joined_0": "2026-11-28", "date_joined_1": "05:00:00",
        "initial-date_joined_0": "2026-11-28", "initial-date_joined_1": "05:00:00"})
    assert changed.status_code == 302, changed.content
    people.outsider.groups.remove(people.others)  # in no request: the service
    assert admin_client.post(f"/admin/auth/user/{newcomer.pk}/delete/", {"post": "yes"}).status_code == 302

    entries = AuditEntry.objects.filter(id__gt=start, subject__in=["user", "group"],
                                        job_name__in=["newcomer", "team-b", "outsider"])
    seen = [(e.subject, e.job_name, e.action, e.actor_name, e.source, e.changes) for e in entries.order_by("id")]
    assert seen == [
        ("user", "newcomer", "create", "admin", "admin", {
            "username": [None, "newcomer"], "first_name": [None, ""], "last_name": [None, ""],
            "email": [None, ""], "is_active": [None, True], "is_staff": [None, False],
            "is_superuser": [None, False], "password": [None, "•••"]}),
        ("group", "team-b", "create", "admin", "admin", {"name": [None, "team-b"]}),
        ("group", "team-b", "change", "admin", "admin", {"permissions": [[], ["jobs.run_command_jobs"]]}),
        ("user", "newcomer", "change", "admin", "admin", {"groups": [[], ["team", "team-b"]]}),
        ("user", "newcomer", "change", "admin", "admin", {"user_permissions": [[], ["jobs.run_command_jobs"]]}),
        ("user", "outsider", "change", "system", "system", {"groups": [["others"], []]}),
        ("user", "newcomer", "delete", "admin", "admin", {"username": ["newcomer", None]}),
    ]
    assert PASSWORD not in json.dumps([e.changes for e in entries])


def test_verify_passes_then_names_an_entry_changed_and_an_entry_missing(people, owned_job):
    client = people.api(people.owner)
    for path in ("pause", "resume", "pause", "resume"):
        client.post(f"/api/jobs/{owned_job.pk}/{path}/")
    count = AuditEntry.objects.count()
    assert verify().startswith(f"OK: {count} entries chained")

    first_pause, resume, second_pause, _ = AuditEntry.objects.filter(subject="job").order_by("id")
    AuditEntry.objects.filter(pk=first_pause.pk).update(detail="nothing happened here")
    with pytest.raises(CommandError, match=rf"changed: entry #{first_pause.pk} \(.* pause job 'owners-job'\)"):
        verify()
    AuditEntry.objects.filter(pk=first_pause.pk).update(detail=first_pause.detail)
    assert verify().startswith(f"OK: {count} entries")

    AuditEntry.objects.filter(pk=resume.pk).delete()
    with pytest.raises(CommandError, match=rf"missing: an entry is missing between entry #{first_pause.pk} and "
                                           rf"entry #{second_pause.pk}"):
        verify()


def test_the_trail_outlives_the_runs_and_still_verifies_after_pruning(people, owned_job, settings):
    from jobs.operations import retention

    settings.JOBS_RETENTION_DAYS, settings.JOBS_RETENTION_MIN_RUNS, settings.AUDIT_RETENTION_DAYS = 30, 1, 365
    AuditEntry.objects.all().delete()  # the trail starts in the past, as a service's would
    client = people.api(people.owner)
    runs = {}
    for days in (400, 40, 0):
        with time_machine.travel(timezone.now() - timedelta(days=days)):
            client.post(f"/api/jobs/{owned_job.pk}/{'pause' if days else 'resume'}/", REMOTE_ADDR=ADDRESS)
            runs[days] = lifecycle.create_run(owned_job)
            JobRun.objects.filter(pk=runs[days].pk).update(status="succeeded", created_at=timezone.now(),
                                                           finished_at=timezone.now())

    report = retention.prune()
    assert set(JobRun.objects.values_list("pk", flat=True)) == {runs[0].pk}  # runs go after 30 days
    assert report.audit_entries == 1
    kept = AuditEntry.objects.filter(subject="job").order_by("id")
    assert [(e.action, e.created_at.date()) for e in kept] == [
        ("pause", (timezone.now() - timedelta(days=40)).date()), ("resume", timezone.now().date())]
    pruning = AuditEntry.objects.get(action="prune")
    assert (pruning.subject, pruning.actor_name, pruning.source) == ("trail", "system", Source.SYSTEM)
    assert verify().startswith(f"OK: {AuditEntry.objects.count()} entries")

    with time_machine.travel(timezone.now() + timedelta(days=330)):  # the pause of 40 days ago is past 365
        assert retention.prune().audit_entries == 1  # the pause of 40 days ago
        assert verify().startswith(f"OK: {AuditEntry.objects.count()} entries")
    first = AuditEntry.objects.order_by("id").first()
    AuditEntry.objects.filter(pk=first.pk).delete()  # the oldest kept entry, after the anchor
    with pytest.raises(CommandError, match=r"missing: an entry is missing before entry #\d+, the first one"):
        verify()


@pytest.mark.postgres("concurrent appends; SQLite has one writer at a time")
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_leave_one_valid_chain():
    threads, each = 6, 15
    start = threading.Barrier(threads)

    def append(n):
        try:
            start.wait()
            for i in range(each):
                with transaction.atomic():
                    trail.record_about("user", f"writer-{n}", "change", Source.SYSTEM, actor_name="system",
                                       detail=f"{n}.{i}")
                    # Still in the transaction, as an action's own writes may follow its entry: without
                    # the lock another writer would read the same tail meanwhile and fork the chain.
                    time.sleep(0.002)
        finally:
            connection.close()

    before = AuditEntry.objects.count()
    workers = [threading.Thread(target=append, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert AuditEntry.objects.count() == before + threads * each
    prevs = list(AuditEntry.objects.values_list("prev_hash", flat=True))
    assert len(set(prevs)) == len(prevs)  # no two entries follow the same one
    assert verify().startswith(f"OK: {before + threads * each} entries")


@pytest.mark.timeout(300)
def test_jobsctl_audit_shows_a_team_only_its_own_entries(jobsctl):
    alice, bob = member_of("team-a", "alice"), member_of("team-b", "bob")
    job = save_job(Job(name="a-report", kind="callable", target="builtin.noop", owner=alice,
                       group=alice.groups.get()), {"type": "manual"})
    trail.record(job, "pause", Source.API, user=alice, actor_name="alice")
    keys = {user.username: access.create(user)[1] for user in (alice, bob)}

    mine = jobsctl("audit", "--subject", "job", token=keys["alice"])
    rows = [line.split() for line in mine.stdout.splitlines() if line.strip()]
    assert mine.returncode == 0, mine.stderr
    assert rows[0] == ["WHEN", "SUBJECT", "NAME", "ACTION", "ACTOR", "SOURCE", "DETAIL"]
    assert [row[3:] for row in rows[1:]] == [["job", "a-report", "pause", "alice", "api", "-"]]
    theirs = jobsctl("audit", token=keys["bob"])
    assert theirs.returncode == 0 and "bob" in theirs.stdout
    assert "a-report" not in theirs.stdout and "alice" not in theirs.stdout
    assert jobsctl("audit", "--subject", "job", token=keys["bob"]).stdout == "No entries.\n"
    bad = jobsctl("audit", "--action", "explode", token=keys["bob"])
    assert bad.returncode == 6 and "action" in bad.stderr, bad.stderr


def test_a_membership_changed_from_the_groups_side_or_cleared_is_recorded_for_each_user(people):
    start = AuditEntry.objects.order_by("-id").values_list("id", flat=True).first()
    people.others.user_set.add(people.owner, people.teammate)
    people.others.user_set.clear()  # the outsider, the owner and the teammate leave "others"
    people.owner.groups.clear()
    people.team.permissions.add(Permission.objects.get(codename="run_command_jobs"))
    people.team.permissions.clear()

    changes = [(e.subject, e.job_name, e.changes) for e in AuditEntry.objects.filter(id__gt=start).order_by("id")]
    assert sorted(changes[:2]) == [("user", "owner", {"groups": [["team"], ["others", "team"]]}),
                                   ("user", "teammate", {"groups": [["team"], ["others", "team"]]})]
    assert sorted(changes[2:5]) == [("user", "outsider", {"groups": [["others"], []]}),
                                    ("user", "owner", {"groups": [["others", "team"], ["team"]]}),
                                    ("user", "teammate", {"groups": [["others", "team"], ["team"]]})]
    assert changes[5:] == [("user", "owner", {"groups": [["team"], []]}),
                           ("group", "team", {"permissions": [[], ["jobs.run_command_jobs"]]}),
                           ("group", "team", {"permissions": [["jobs.run_command_jobs"], []]})]


def test_an_entry_written_unchained_during_an_upgrade_is_chained_by_the_next_append(people, owned_job):
    # As a process of the previous release writes it while the new one is rolled out: no hash.
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {AuditEntry._meta.db_table} (job_name, subject, action, actor_name, source, "
                       "remote_addr, created_at, changes, detail) VALUES ('owners-job', 'job', 'pause', 'owner', "
                       "'api', '', %s, '{}', '')", [timezone.now()])
    old = AuditEntry.objects.order_by("-id").first()
    with pytest.raises(CommandError, match=rf"unchained: entry #{old.pk} has no hash"):
        verify()
    people.api(people.owner).post(f"/api/jobs/{owned_job.pk}/resume/")
    assert verify().startswith(f"OK: {AuditEntry.objects.count()} entries")
