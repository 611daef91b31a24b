"""A workflow run checks again, as each step starts, that the users it runs for (the workflow's owner,
and whoever started the run) are active and still see the step's job: one who left the job's group,
or whose job was moved to another group, since the workflow was saved does not get it run. The step is
skipped with the reason, and the steps after it follow their edges' failure policy."""

import pytest
from django.contrib.auth.models import Group, User

from jobs import lifecycle
from jobs.models import Job
from workflows import progress
from workflows.models import WorkflowRunStatus

from .test_workflows_workers import finished, keys_of, steps
from .workflow_helpers import make_job, make_workflow


@pytest.fixture
def team(db):
    team = Group.objects.create(name="team")
    owner, teammate = User.objects.create_user("owner"), User.objects.create_user("teammate")
    owner.groups.add(team)
    teammate.groups.add(team)
    return team, owner, teammate


def teammates_chain(team, owner, teammate, path="/dev/null", seconds=0):
    """a (the owner's) → b (the teammate's, shared with the team) → c (the owner's)."""
    make_job("a", kwargs={"path": path, "seconds": seconds}, owner=owner)
    make_job("b", kwargs={"path": path}, owner=teammate, group=team)
    make_job("c", kwargs={"path": path}, owner=owner)
    return make_workflow("chain", "abc", [("a", "b"), ("b", "c")], owner=owner)


def succeed(wf_run, name):
    run = wf_run.steps.get(job__name=name).run
    assert lifecycle.claim(run.pk, run.attempt, "w", 1)
    lifecycle.record_success(run.pk, run.attempt)


def test_a_user_who_left_the_jobs_group_does_not_get_the_next_step_run(team):
    group, owner, teammate = team
    wf_run = progress.start(teammates_chain(group, owner, teammate), user=owner)
    assert steps(wf_run) == {"a": "active", "b": "waiting", "c": "waiting"}

    owner.groups.remove(group)
    succeed(wf_run, "a")

    wf_run.refresh_from_db()
    assert steps(wf_run) == {"a": "succeeded", "b": "skipped", "c": "skipped"}
    step = wf_run.steps.get(job__name="b")
    assert (step.reason, step.run) == ("owner, for whom it runs, may no longer see the job b", None)
    assert wf_run.status == WorkflowRunStatus.FAILED
    assert not Job.objects.get(name="b").runs.exists()


def test_a_job_moved_out_of_sight_or_a_deactivated_starter_stops_a_scheduled_run_too(team):
    group, owner, teammate = team
    workflow = teammates_chain(group, owner, teammate)
    wf_run = progress.start(workflow)  # the scheduler's: no user started it, it runs for its owner
    Job.objects.filter(name="b").update(group=Group.objects.create(name="elsewhere"))
    succeed(wf_run, "a")
    assert wf_run.steps.get(job__name="b").reason == "owner, for whom it runs, may no longer see the job b"

    staff = User.objects.create_user("staff", is_staff=True)
    wf_run = progress.start(workflow, user=staff)
    Job.objects.filter(name="b").update(group=group)
    staff.is_active = False
    staff.save()
    succeed(wf_run, "a")
    assert steps(wf_run) == {"a": "succeeded", "b": "skipped", "c": "skipped"}
    assert wf_run.steps.get(job__name="b").reason == "staff, for whom it runs, is no longer active"


@pytest.mark.timeout(90)
def test_through_a_real_worker_the_step_after_the_change_never_runs(processes, ledger, team):
    group, owner, teammate = team
    wf_run = progress.start(teammates_chain(group, owner, teammate, ledger.path, seconds=2), user=owner)
    processes.worker()
    owner.groups.remove(group)  # while a runs

    wf_run = finished(wf_run)
    assert wf_run.status == WorkflowRunStatus.FAILED
    assert steps(wf_run) == {"a": "succeeded", "b": "skipped", "c": "skipped"}
    assert len(keys_of(ledger, "start", "a")) == 1
    assert keys_of(ledger, "start", "b") == [] and keys_of(ledger, "start", "c") == []
