"""manage.py jobs import celery-beat: every PeriodicTask shape, the report, --dry-run,
--disable-originals in the import's transaction, and a second run that changes nothing."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from celery import shared_task
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    PeriodicTasks,
    SolarSchedule,
)

from audit.models import AuditEntry
from jobs.models import Job

from .conftest import manage_py

pytestmark = pytest.mark.django_db


@shared_task(name="tests.celery_only")
def celery_only():
    """A Celery task of the user's outside JOBS_CALLABLE_MODULES: no job may run it."""


def run_import(*args, user=None):
    out = StringIO()
    call_command("jobs", *(["--as", user] if user else []), "import", "celery-beat", *args, stdout=out)
    return out.getvalue()


def crontab(minute="*", hour="*", dom="*", month="*", dow="*", zone="UTC"):
    return CrontabSchedule.objects.create(
        minute=minute, hour=hour, day_of_month=dom, month_of_year=month, day_of_week=dow, timezone=zone
    )


def periodic(name, task="builtin.noop", **fields):
    return PeriodicTask.objects.create(name=name, task=task, **fields)


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def rows(settings, now):
    """A row of every shape the importer reads, by name."""
    settings.JOBS_QUEUES = {"jobs": None, "reports": None}
    every_90s = IntervalSchedule.objects.create(every=90, period=IntervalSchedule.SECONDS)
    every_2h = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.HOURS)
    made = [
        periodic(
            "nightly report",
            task="test.keys",
            crontab=crontab("30", "2", zone="Europe/Berlin"),
            kwargs='{"path": "/tmp/ledger"}',
            description="The nightly report.",
        ),
        periodic(
            "poller",
            interval=every_90s,
            args='[1, "two"]',
            kwargs='{"marker": "m"}',
            queue="reports",
            priority=2,
            expire_seconds=30,
        ),
        periodic(
            "launch",
            clocked=ClockedSchedule.objects.create(clocked_time=now + timedelta(days=3)),
            one_off=True,
            expires=now + timedelta(days=3, minutes=10),
        ),
        periodic("weekdays", crontab=crontab("0", "9", dow="mon-fri", zone="America/New_York"), enabled=False),
        periodic("later once", interval=every_2h, one_off=True, start_time=now + timedelta(days=1)),
        periodic("not yet", interval=every_2h, start_time=now + timedelta(days=2)),
        periodic("begun", interval=every_2h, start_time=now - timedelta(days=2), expires=now + timedelta(days=30)),
        periodic("over", crontab=crontab("15"), expires=now - timedelta(hours=1)),
        periodic("sunset", solar=SolarSchedule.objects.create(event="sunset", latitude=52.52, longitude=13.40)),
        periodic("first monday", crontab=crontab("0", "8", dom="1-7", dow="1")),
        periodic("celery only", task="tests.celery_only", interval=every_90s),
        periodic("summed", task="tests.add", crontab=crontab("*/5"), args="[2, 3]"),
        periodic("cleanup", task="celery.backend_cleanup", crontab=crontab("0", "4")),
        periodic("routed", interval=every_90s, exchange="topic", routing_key="a.b", headers='{"x": 1}'),
        periodic("one-off cron", crontab=crontab("0", "6", zone="Asia/Kolkata"), one_off=True),
    ]
    return {task.name: task for task in made}


def slots_of_crontab(task, after, count):
    """The row's next slots as beat reads them: its CrontabSchedule's Celery schedule."""
    schedule, slots, last = task.crontab.schedule, [], after
    while len(slots) < count:
        start, delta, _ = schedule.remaining_delta(last)
        last = start + delta
        slots.append(last.astimezone(UTC))
    return slots


def test_every_shape_carries_over_as_beat_reads_it(rows, now):
    out = run_import()
    jobs = {job.name: job for job in Job.objects.select_related("crontab", "interval", "clocked")}
    assert set(jobs) == {
        "nightly report",
        "poller",
        "launch",
        "weekdays",
        "later once",
        "not yet",
        "begun",
        "over",
        "routed",
        "one-off cron",
        "summed",
    }

    nightly = jobs["nightly report"]
    assert (nightly.kind, nightly.target, nightly.kwargs) == ("callable", "test.keys", {"path": "/tmp/ledger"})
    assert (nightly.cron_expression, str(nightly.crontab.timezone)) == ("30 2 * * *", "Europe/Berlin")
    assert nightly.description == "The nightly report." and nightly.enabled and "celery-beat" in nightly.tags
    # Beat's reading and the job's agree on ordinary days and across both changes of the clocks
    # (02:30 is skipped on 29 March and comes twice on 25 October in Berlin).
    for after in (
        datetime(2026, 6, 1, tzinfo=UTC),
        datetime(2026, 3, 24, tzinfo=UTC),
        datetime(2026, 10, 20, tzinfo=UTC),
    ):
        assert nightly.upcoming_slots(10, after=after) == slots_of_crontab(rows["nightly report"], after, 10)
    after = datetime(2026, 6, 1, tzinfo=UTC)
    weekdays = jobs["weekdays"]
    assert not weekdays.enabled and str(weekdays.crontab.timezone) == "America/New_York"
    weekdays.enabled = True  # the slots it would have
    assert weekdays.upcoming_slots(10, after=after) == slots_of_crontab(rows["weekdays"], after, 10)

    summed = jobs["summed"]  # a Celery task of JOBS_CALLABLE_MODULES: a task job runs its function
    assert (summed.kind, summed.target, summed.args, summed.cron_expression) == ("task", "tests.add", [2, 3], "*/5 * * * *")

    poller = jobs["poller"]
    assert (poller.args, poller.kwargs, poller.queue) == ([1, "two"], {"marker": "m"}, "reports")
    assert poller.priority == 7  # Celery's 2 on Redis, 0 the most urgent; a job's 9 is
    assert poller.start_deadline_seconds == 30  # expire_seconds
    slots = poller.upcoming_slots(10)
    every = rows["poller"].schedule.run_every
    assert {b - a for a, b in zip(slots, slots[1:], strict=False)} == {every}
    assert jobs["begun"].every_seconds == 7200 and jobs["begun"].enabled

    launch = jobs["launch"]
    assert launch.clocked.clocked_time == rows["launch"].clocked.clocked_time
    assert launch.start_deadline_seconds == 600  # expires ten minutes after its moment
    assert jobs["later once"].clocked.clocked_time == rows["later once"].start_time
    # A one-off beat sends at the first slot after the row's last change.
    one_off = rows["one-off cron"]
    assert [jobs["one-off cron"].clocked.clocked_time] == slots_of_crontab(one_off, one_off.date_changed, 1)
    assert not jobs["not yet"].enabled  # its start is to come; a job has no start date
    assert not jobs["over"].enabled  # expired: beat sends it no more

    assert "PeriodicTask {} 'nightly report' (test.keys) -> job nightly report".format(rows["nightly report"].pk) in out
    assert "    carried over: crontab 30 2 * * * in Europe/Berlin" in out
    assert "    carried over: priority 2 -> 7 (Celery on Redis: 0 the most urgent; a job: 9)" in out
    assert "a job has no start date; imported paused: resume it then." in out
    assert "a job has no end date; pause or delete it then." in out
    assert "    not carried over: exchange topic: a job's run is sent to its queue." in out
    assert "    not carried over: headers: a job's messages carry the service's own." in out
    assert "'sunset' (builtin.noop): not carried over: a solar schedule (sunset at 52.52" in out
    assert "'first monday' (builtin.noop): not carried over: the crontab restricts both" in out
    assert "'celery only' (tests.celery_only): not carried over: tests.celery_only is a Celery task outside " \
           "JOBS_CALLABLE_MODULES" in out
    assert "'summed' (tests.add) -> job summed" in out and "    carried over: task tests.add, args and kwargs" in out
    assert "'cleanup' (celery.backend_cleanup): not carried over: the service's own task" in out
    assert "imported: 11 jobs created." in out
    assert AuditEntry.objects.filter(action="create", source="cli", detail="jobs apply: 11 job(s) created").exists()
    assert PeriodicTask.objects.filter(enabled=True).count() == 14  # without --disable-originals: untouched


def test_running_it_again_changes_nothing(rows):
    run_import("--disable-originals")
    before = {job.name: (job.updated_at, job.next_run_at, job.enabled) for job in Job.objects.all()}
    entries = AuditEntry.objects.count()
    out = run_import("--disable-originals")
    assert "no changes" not in out and "imported: 0 jobs created." in out
    assert "-> job poller: a job of this name exists already; left as it is." in out
    assert {job.name: (job.updated_at, job.next_run_at, job.enabled) for job in Job.objects.all()} == before
    assert AuditEntry.objects.count() == entries


def test_dry_run_writes_nothing(rows):
    changed, entries = PeriodicTasks.last_change(), AuditEntry.objects.count()
    out = run_import("--dry-run", "--disable-originals")
    assert "+ create poller" in out and "dry run: the import is valid; nothing was saved." in out
    assert not Job.objects.exists() and AuditEntry.objects.count() == entries
    assert PeriodicTask.objects.filter(enabled=True).count() == 14
    assert PeriodicTasks.last_change() == changed


def test_disable_originals_disables_what_became_jobs(rows):
    out = run_import("--disable-originals")
    still = set(PeriodicTask.objects.filter(enabled=True).values_list("name", flat=True))
    # What did not carry over keeps running under beat.
    assert still == {"sunset", "first monday", "celery only", "cleanup"}
    assert (
        "disables 10 PeriodicTask row(s): nightly report, poller, launch, later once, not yet, begun, over, "
        "summed, routed, one-off cron." in out
    )
    assert PeriodicTasks.last_change() is not None  # beat is told


def test_a_failing_import_leaves_the_originals_enabled(rows, settings):
    """The quota refuses the jobs when they are saved: the rows' disabling is rolled back with them."""
    settings.JOBS_MAX_JOBS_PER_USER = 3
    user = get_user_model().objects.create_user("ann")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["change_periodictask", "view_periodictask"]))
    with pytest.raises(CommandError, match="nothing was imported") as refused:
        run_import("--disable-originals", user="ann")
    assert "may own at most 3 (JOBS_MAX_JOBS_PER_USER)" in str(refused.value)
    assert not Job.objects.exists()
    assert PeriodicTask.objects.filter(enabled=True).count() == 14


def test_another_user_needs_the_permission_to_disable(rows):
    get_user_model().objects.create_user("bob")
    with pytest.raises(CommandError, match="needs the permission django_celery_beat.change_periodictask"):
        run_import("--disable-originals", user="bob")
    assert not Job.objects.exists()


def test_bad_rows_are_named_and_nothing_is_imported(rows):
    periodic("typo", task="reports.nightyl", interval=IntervalSchedule.objects.first())
    periodic("bad args", interval=IntervalSchedule.objects.first(), args="[1, ")
    with pytest.raises(CommandError) as refused:
        run_import("--disable-originals")
    message = str(refused.value)
    assert (
        "'typo' (reports.nightyl): task: no job function nor Celery task is registered as 'reports.nightyl'" in message
    )
    assert "'bad args' (builtin.noop): args: not JSON" in message
    assert not Job.objects.exists()
    assert PeriodicTask.objects.filter(enabled=True).count() == 16


def test_a_tasks_arguments_that_do_not_fit_its_signature_are_named_and_nothing_is_imported(rows):
    periodic("misfit", task="tests.add", interval=IntervalSchedule.objects.first(), args="[1]", kwargs='{"z": 2}')
    with pytest.raises(CommandError) as refused:
        run_import("--disable-originals")
    message = str(refused.value)
    assert "misfit" in message and "kwargs: Does not fit the task tests.add(x, y, path=None)" in message
    assert not Job.objects.exists()
    assert PeriodicTask.objects.filter(enabled=True).count() == 15


def test_a_job_of_the_same_name_that_no_import_made_keeps_its_row_running(rows):
    from jobs.definitions.jobs import save_job

    save_job(Job(name="poller", kind="callable", target="builtin.echo"), {"type": "manual"})
    out = run_import("--disable-originals")
    assert Job.objects.get(name="poller").target == "builtin.echo"
    assert "a job of this name that no import made exists: the row is left enabled." in out
    assert PeriodicTask.objects.get(name="poller").enabled


def test_a_process_of_its_own_knows_the_apps_tasks(transactional_db):
    """manage.py has not imported the apps' task modules (a worker does as it starts): the service's
    own rows are still recognised, and a user's Celery task still found."""
    every = IntervalSchedule.objects.create(every=600, period=IntervalSchedule.SECONDS)
    periodic("jobs-prune-runs", task="jobs.prune_runs", interval=every)
    periodic("deliver", task="notifications.send_delivery", interval=every)
    done = manage_py("jobs", "import", "celery-beat", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "'jobs-prune-runs' (jobs.prune_runs): not carried over: the service's own task" in done.stdout
    assert "'deliver' (notifications.send_delivery): not carried over: the service's own task" in done.stdout
