"""jobs.actions: each user action changes the job and writes its one audit entry together, checks the
command-job rule itself, and refuses what a person gets wrong with one ActionError that every
interface answers in its own way. (tests/test_audit.py drives each action through each interface.)"""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client, RequestFactory
from django.urls import reverse

from jobs.actions import jobs as actions
from jobs.actions.jobs import ActionError, Actor
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus

from .work_trail import work_entries

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 11, 20, tzinfo=UTC)


def actor_of(user, source="api", address="10.9.8.7"):
    request = RequestFactory().post("/", REMOTE_ADDR=address)
    request.user = user
    return Actor.of_request(request, source)


def hourly(name, **fields):
    fields = {"kind": "callable", "target": "builtin.noop", **fields}
    return save_job(Job(name=name, **fields), {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})


def entries():
    return [(e.action, e.job_name, e.actor_name, e.source, e.remote_addr, e.detail)
            for e in work_entries().order_by("created_at", "id")]


def test_each_action_writes_one_entry_naming_its_actor(people):
    me = actor_of(people.owner)
    job = actions.create(me, Job(name="made", kind="callable", target="builtin.noop", owner=people.owner),
                         {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    actions.edit(me, job, {"max_retries": 2})
    actions.edit(me, job, {"max_retries": 2})  # nothing changes: no entry
    copy = actions.clone(me, job)
    actions.pause(me, job)
    actions.resume(me, job)
    run = actions.run_now(me, job)
    assert actions.cancel(me, run) is True
    assert actions.cancel(me, run) is False  # already cancelled: nothing happened, no entry
    found = actions.backfill(me, job, DAY, DAY + timedelta(hours=2))
    actions.delete(me, copy)

    address = "10.9.8.7"
    assert entries() == [
        ("create", "made", "owner", "api", address, ""),
        ("change", "made", "owner", "api", address, ""),
        ("create", "made (copy)", "owner", "api", address, "cloned from made"),
        ("pause", "made", "owner", "api", address, ""),
        ("resume", "made", "owner", "api", address, ""),
        ("run_now", "made", "owner", "api", address, f"run #{run.pk}"),
        ("cancel", "made", "owner", "api", address, f"run #{run.pk}"),
        ("backfill", "made", "owner", "api", address,
         "2 run(s) for the slots from 2026-11-20T00:00:00+00:00 to 2026-11-20T02:00:00+00:00 (0 already had a run)"),
        ("delete", "made (copy)", "owner", "api", address, ""),
    ]
    assert len(found.created) == 2 and not Job.objects.filter(name="made (copy)").exists()
    assert work_entries().get(action="change").changes == {"max_retries": [0, 2]}
    assert set(work_entries().values_list("actor", flat=True)) == {people.owner.pk}
    run.refresh_from_db()
    assert (run.status, run.reason) == (RunStatus.CANCELLED, "Cancelled by owner from the API")


def test_a_clone_is_a_disabled_copy_and_leaves_the_original_alone(people):
    job = hourly("report", owner=people.owner, max_retries=4)
    pk = job.pk
    first, second = actions.clone(actor_of(people.owner), job), actions.clone(actor_of(people.owner), job)

    assert (first.name, second.name) == ("report (copy)", "report (copy 2)")
    assert (first.enabled, first.max_retries, first.cron_expression) == (False, 4, "0 * * * *")
    assert (job.pk, job.name, job.enabled) == (pk, "report", True)
    job.refresh_from_db()
    assert (job.name, job.enabled) == ("report", True)


def test_an_action_and_its_entry_are_saved_together_or_not_at_all(people):
    # An entry that cannot be written (a source the trail does not know) undoes the change with it.
    job = hourly("kept", owner=people.owner)
    broken = Actor(people.owner, "telepathy", "", "owner")

    for action in (actions.pause, actions.run_now, actions.clone):
        with pytest.raises(ValueError):
            action(broken, job)

    job.refresh_from_db()
    assert job.enabled and not job.runs.exists() and Job.objects.count() == 2
    assert not work_entries().exists()


def test_a_command_job_is_refused_to_who_may_not_manage_one_and_nothing_changes(people):
    shell = hourly("shell", kind="command", target="echo hi", owner=people.owner)
    run = JobRun.objects.create(job=shell, scheduled_for=DAY, status=RunStatus.QUEUED)
    owner = actor_of(people.owner)
    attempts = [
        lambda: actions.run_now(owner, shell), lambda: actions.pause(owner, shell),
        lambda: actions.resume(owner, shell), lambda: actions.edit(owner, shell, {"target": "rm -rf /"}),
        lambda: actions.delete(owner, shell), lambda: actions.clone(owner, shell),
        lambda: actions.cancel(owner, run), lambda: actions.backfill(owner, shell, DAY, DAY + timedelta(hours=1)),
        lambda: actions.create(owner, Job(name="new-shell", kind="command", target="true")),
        lambda: actions.edit(owner, people.job, {"kind": "command", "target": "true"}),  # becoming one
    ]

    for attempt in attempts:
        with pytest.raises(ActionError) as refused:
            attempt()
        assert refused.value.kind == ActionError.FORBIDDEN
        assert "command jobs" in refused.value.message.lower()

    shell.refresh_from_db()
    people.job.refresh_from_db()
    assert (shell.target, shell.enabled, people.job.kind) == ("echo hi", True, "callable")
    assert list(Job.objects.order_by("name").values_list("name", flat=True)) == ["nightly-report", "shell"]
    assert JobRun.objects.get().status == RunStatus.QUEUED
    assert not work_entries().exists()
    # A holder of run_command_jobs may, and so may the command line, which runs on a host of the
    # service (its settings, its database).
    assert actions.run_now(actor_of(people.runner), shell).job == shell
    assert actions.pause(Actor.command_line(), shell).enabled is False
    assert [e[0] for e in entries()] == ["run_now", "pause"]


def test_an_invalid_change_names_the_field_and_saves_nothing(people):
    with pytest.raises(ActionError) as invalid:
        actions.edit(actor_of(people.owner), people.job, {"target": "no.such.function", "max_retries": 5})

    assert invalid.value.kind == ActionError.INVALID
    assert list(invalid.value.fields) == ["target"]
    assert "No registered function named 'no.such.function'" in invalid.value.message
    people.job.refresh_from_db()
    assert (people.job.target, people.job.max_retries) == ("builtin.echo", 0)
    assert not work_entries().exists()


def test_each_interface_answers_a_refusal_its_own_way_and_writes_no_entry(people):
    shell = hourly("shell", kind="command", target="echo hi", owner=people.owner, group=people.team)
    api = people.client(people.teammate)
    refused = api.post(f"/api/jobs/{shell.pk}/pause/")
    assert (refused.status_code, refused.json()["detail"]) == (403, actions.COMMAND_JOBS_DENIED)
    invalid = api.patch(f"/api/jobs/{people.job.pk}/", {"target": "no.such.function"}, format="json")
    assert invalid.status_code == 400 and "No registered function" in invalid.json()["target"][0]
    page = Client()
    page.force_login(people.teammate)
    assert page.post(f"/jobs/{shell.pk}/run/").status_code == 403
    assert page.post(f"/jobs/{shell.pk}/backfill/", {"from": "2026-11-20T00:00", "to": "2026-11-20T02:00"}
                     ).status_code == 403

    assert not work_entries().exists() and not shell.runs.exists()
    shell.refresh_from_db()
    assert shell.enabled


def test_an_actor_of_a_request_needs_a_login(people):
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(ActionError) as refused:
        actor_of(AnonymousUser())
    assert refused.value.kind == ActionError.FORBIDDEN


def test_the_admin_answers_a_refusal_with_a_message_and_changes_nothing(client):
    # Staff with every permission on jobs but run_command_jobs: the action refuses, the admin says so.
    from django.contrib.auth.models import Permission, User

    staff = User.objects.create_user("staffer", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="jobs")
                               .exclude(codename="run_command_jobs"))
    client.force_login(staff)
    shell = hourly("shell", kind="command", target="echo hi")

    listing = client.post(reverse("admin:jobs_job_changelist"),
                          {"action": "pause_selected", ACTION_CHECKBOX_NAME: [shell.pk]}, follow=True)

    assert [str(m) for m in listing.context["messages"]] == [actions.COMMAND_JOBS_DENIED]
    shell.refresh_from_db()
    assert (shell.enabled, shell.target) == (True, "echo hi")
    assert not work_entries().exists()
