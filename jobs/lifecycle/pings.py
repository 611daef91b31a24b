"""The runs of check-in jobs (jobs.kinds.checkin), which run elsewhere and report by pings.

A ping belongs to the job's latest slot at or before it (or one due within ``EARLY``, for a clock a
little ahead): the first ping of a slot makes its run (``start``: running; a success, a failure or an
exit status: ended). A completion ends the job's running run, whichever slot it started for, so a
start and its success give the duration. A ping after the slot's run ended is an extra run (trigger
``ping``); when that run was ended by a ping, the job was pinged more often than its schedule
(``too_often``). A slot with no ping ``grace_seconds`` after it gets a run ended ``failed``
(``NO_PING``; notifications send ``missed`` for it): ``fail_unpinged``, a duty of the scheduler
leader. The scheduler itself makes no run of these jobs and nothing publishes one.
"""

import functools
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, Q, Value
from django.db.models.functions import Coalesce

from ..models import AttemptOutcome, Job, JobAttempt, JobRun, RunStatus, RunTrigger, ScheduleType
from ..models.job import DEFAULT_GRACE_SECONDS
from ..timing import clock
from . import events, postgres
from .moves import transition
from .runs import create_runs

NO_PING = "no ping within the grace time"
EARLY = timedelta(seconds=5)  # a ping this close before a slot belongs to it (the pinging host's clock is ahead)
START, SUCCESS, FAIL = "start", "success", "fail"
MAX_SLOTS = 1000  # slots looked at for one job at once
RECURRING = [ScheduleType.CRON, ScheduleType.INTERVAL, ScheduleType.ONCE]
NO_MORE_SLOTS = datetime(9999, 12, 31, tzinfo=UTC)  # ping_check_from of a schedule with no slot left
UNREAD = object()  # slot_of: the job's last slot with a run, not read yet


@dataclass(frozen=True)
class Ping:
    kind: str  # START, SUCCESS or FAIL
    exit_status: int | None = None  # given as /ping/<uuid>/<exit status>: 0 a success, else a failure
    output: str = ""  # the body, already cut to the cap
    output_bytes: int = 0  # the body's size as sent
    address: str = ""  # the client's, named as the attempt's worker


def pinged_job(kinds, key, slug=None):
    """The id of the job of ``kinds`` (the check-in kinds) a ping URL names, or None: by its uuid
    ``key`` (``Job.ping_key``), or by its team's ping key and its name (``slug``). One SELECT, its SQL
    made by the ORM once and prepared on PostgreSQL: a ping's one query (jobs.api.pings)."""
    sql, params, key_at, name_at = _lookup(tuple(kinds), slug is not None)
    params = list(params)
    params[key_at] = key if slug is not None else _ping_key(key)
    if params[key_at] is None:
        return None
    if slug is not None:
        params[name_at] = slug
    if connection.vendor == "postgresql":
        row = postgres._execute(sql, params)
    else:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
    return row[0] if row else None


@functools.cache
def _lookup(kinds, by_slug):
    """(SQL, its parameters, where in them the key and the name go), made once from a query with
    probes for the key and the name."""
    jobs = Job.objects.filter(kind__in=kinds)
    if by_slug:
        key, name = f"probe-key-{uuid.uuid4().hex}", f"probe-name-{uuid.uuid4().hex}"
        jobs = jobs.filter(group__ping_key__key=key, name=name)
    else:
        key, name = _ping_key(str(uuid.uuid4())), None
        jobs = jobs.filter(ping_key=key)
    sql, params = jobs.values_list("pk", flat=True)[:1].query.sql_with_params()
    return sql, tuple(params), params.index(key), params.index(name) if by_slug else None


def _ping_key(key):
    """A uuid key as the database takes it (``Job.ping_key``); None for what is no uuid."""
    try:
        return Job._meta.get_field("ping_key").get_db_prep_value(uuid.UUID(key), connection)
    except ValueError:
        return None


def record_ping(job_id, ping, now=None):
    """Record ``ping`` of the check-in job ``job_id`` at ``now`` (when it came); returns its run, or
    None when the job is gone (deleted since it was pinged)."""
    now = now or clock.now()
    with transaction.atomic():
        # The pings of one job one at a time: two at once would both make the slot's run.
        job = (Job.objects.select_for_update(of=("self",)).select_related("crontab", "interval", "clocked")
               .filter(pk=job_id).first())
        if job is None:
            return None
        if ping.kind != START:
            running = JobRun.objects.filter(job=job, status=RunStatus.RUNNING).order_by("-started_at").first()
            if running is not None:
                return end_run(running, ping, now)
        slot = slot_of(job, now)
        run = JobRun.objects.filter(job=job, scheduled_for=slot).first() if slot is not None else None
        too_often = False
        if run is None and slot is not None:
            run = _made(job, slot, RunTrigger.SCHEDULE, now)
        elif run is None or run.is_terminal:
            too_often = run is not None and run.reason != NO_PING
            run = _made(job, now, RunTrigger.PING, now)
        elif ping.kind == START:
            return run  # started again: the first start counts
        if ping.kind == START:
            if transition(run, RunStatus.RUNNING, frm=[RunStatus.PENDING], started_at=now, reason="",
                          output=ping.output, output_bytes=ping.output_bytes):
                _attempt(run, ping, now)
        else:
            end_run(run, ping, now)
        if too_often:
            events.emit(events.TOO_OFTEN, run=run, slot=slot)
    return run


def _made(job, slot, trigger, now):
    """A pending run of ``job`` for ``slot`` (the next free microsecond for an extra run), moved on
    by the caller in the same transaction."""
    for offset in range(100):
        at = slot + timedelta(microseconds=offset)
        if created := create_runs([(job, at, RunStatus.PENDING, "", None)], now, trigger=trigger):
            break
    else:
        raise RuntimeError(f"no free slot for a ping of job {job.pk}")
    run_id = created[0][0]
    Job.objects.filter(Q(last_run__isnull=True) | Q(last_run__lt=run_id), pk=job.pk).update(last_run=run_id)
    run = JobRun.objects.get(pk=run_id)
    run.job = job
    return run


def end_run(run, ping, now):
    failed = ping.kind == FAIL or (ping.exit_status is not None and ping.exit_status != 0)
    status = RunStatus.FAILED if failed else RunStatus.SUCCEEDED
    fields = {"finished_at": now, "reason": ""}
    if ping.output or not run.output:
        fields.update(output=ping.output, output_bytes=ping.output_bytes)
    if ping.exit_status is not None:
        fields["result"] = {"exit_status": ping.exit_status}
    if failed:
        fields["error"] = (f"exit status {ping.exit_status}" if ping.exit_status is not None
                           else "the job reported a failure (/fail)")
    if transition(run, status, frm=[RunStatus.PENDING, RunStatus.RUNNING], **fields):
        outcome = AttemptOutcome.FAILED if failed else AttemptOutcome.SUCCEEDED
        ended = JobAttempt.objects.filter(run_id=run.pk, number=1, outcome=AttemptOutcome.RUNNING).update(
            outcome=outcome, finished_at=now, error=fields.get("error", ""))
        if not ended:  # no start: the attempt is the ping that ended the run
            _attempt(run, ping, now, outcome=outcome, finished_at=now, error=fields.get("error", ""))
        events.emit(status, run=run)
    return run


def _attempt(run, ping, now, **fields):
    """The run's one attempt, as the pages and the on-time reports read a run's (its start: the first ping)."""
    JobAttempt.objects.create(run_id=run.pk, number=1, task_id="", worker=f"ping from {ping.address or '?'}"[:255],
                              started_at=now, **fields)


def _first_unreported(job, last_slot):
    """Where the slots with nothing known of them start: after the last slot with a run, not before
    the job was last saved (made, edited, resumed)."""
    after = last_slot + timedelta(microseconds=1) if last_slot else None
    return max(filter(None, [after, job.updated_at]))


def _last_slot(job):
    return (JobRun.objects.filter(job=job, trigger=RunTrigger.SCHEDULE).order_by("-scheduled_for")
            .values_list("scheduled_for", flat=True).first())


def slot_of(job, now, last=UNREAD):
    """The slot a ping at ``now`` belongs to: the job's latest slot at or before ``now`` (or in the
    next ``EARLY``) and since it was last saved; None when it has none (a manual job, a first ping
    before its first slot). ``last``: the job's last slot with a run, when the caller read it."""
    if job.schedule_type not in RECURRING:
        return None
    if last is UNREAD:
        last = _last_slot(job)
    start = _first_unreported(job, last)
    slots = job.slots_between(start, now + EARLY, MAX_SLOTS)
    if len(slots) > MAX_SLOTS:  # silent for long (no leader to fail its slots): the last day's will do
        slots = job.slots_between(now - timedelta(days=1), now + EARLY, MAX_SLOTS)
    if slots:
        return slots[-1]
    return last if last is not None and last >= job.updated_at else None


def fail_unpinged(kinds, now=None, until=None):
    """End ``failed`` (``NO_PING``) a run for each slot of an enabled job of ``kinds`` (the check-in
    kinds, jobs.kinds.running_elsewhere) that got no ping within its grace: a duty of the scheduler
    leader. A pass reads only the jobs whose first slot still to look at (``Job.ping_check_from``;
    when unknown, the job's last save) is past its grace. ``until``: the pings that came before it are
    recorded (jobs.lifecycle.ping_queue), so the pass looks no further. Returns how many."""
    now = min(filter(None, [now or clock.now(), until]))
    # A check-in has a ping key: the few among many jobs come from its unique index, not a scan.
    jobs = (Job.objects.filter(ping_key__isnull=False, kind__in=kinds, enabled=True, schedule_type__in=RECURRING)
            .select_related("crontab", "interval", "clocked"))
    if connection.vendor == "postgresql":  # (SQLite cannot multiply an interval: every job is read there)
        grace = ExpressionWrapper(Coalesce("grace_seconds", DEFAULT_GRACE_SECONDS) * Value(timedelta(seconds=1)),
                                  output_field=DurationField())
        looked_at = Coalesce("ping_check_from", "updated_at")
        jobs = jobs.alias(due_at=ExpressionWrapper(looked_at + grace, output_field=DateTimeField())).filter(
            due_at__lte=now)
    failed = 0
    for job in jobs:
        end = now - job.grace
        start = job.ping_check_from or job.updated_at
        if start > end:
            continue
        slots = job.slots_between(start, end, MAX_SLOTS)[-MAX_SLOTS:]
        failed += _fail_slots(job, slots, now, _first_slot_from(job, end))
    return failed


def _first_slot_from(job, moment):
    try:
        following = job.slots_between(moment, NO_MORE_SLOTS, 0)
    except (OverflowError, ValueError):
        following = None
    return following[0] if following else NO_MORE_SLOTS


def _fail_slots(job, slots, now, following):
    """Fail the slots of ``slots`` that have no run; the job's next slot to look at is ``following``."""
    failed = 0
    with transaction.atomic():
        # Under the job's lock: a ping of one of these slots either came first (its run stays) or waits.
        # A job saved (edited, resumed) since it was read is looked at again from its new place.
        locked = (Job.objects.select_for_update(of=("self",))
                  .filter(pk=job.pk, enabled=True, updated_at=job.updated_at, ping_check_from=job.ping_check_from)
                  if job.ping_check_from else
                  Job.objects.select_for_update(of=("self",))
                  .filter(pk=job.pk, enabled=True, updated_at=job.updated_at, ping_check_from__isnull=True))
        if not list(locked.values_list("pk", flat=True)):
            return 0
        created = create_runs([(job, slot, RunStatus.PENDING, NO_PING, None) for slot in slots], now) if slots else []
        for run in JobRun.objects.filter(pk__in=[run_id for run_id, *_ in created]).order_by("scheduled_for"):
            run.job = job
            if transition(run, RunStatus.FAILED, frm=[RunStatus.PENDING], finished_at=now, error=NO_PING):
                events.emit(RunStatus.FAILED, run=run)
                failed += 1
        if created:
            last = max(run_id for run_id, *_ in created)
            Job.objects.filter(Q(last_run__isnull=True) | Q(last_run__lt=last), pk=job.pk).update(last_run=last)
        Job.objects.filter(pk=job.pk).update(ping_check_from=following)
    return failed
