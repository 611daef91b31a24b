"""manage.py runs list [--job NAME] [--status S] [--since ISO|1h] [--limit N] | cancel ID | tail ID
manage.py runs prune [--dry-run] [--job NAME] [--batch N]"""

import re
import time as clock
from datetime import UTC, datetime, time, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from jobs.actions import jobs as actions
from jobs.models import Job, JobRun, RunStatus
from jobs.operations import retention

from .jobs import act, format_duration, table, when

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
EXIT_FAILED = 1
# The line OutputTail puts before a tail that lost its beginning.
DROPPED_LINE = re.compile(r"\[\d+ earlier bytes of \d+ not kept; the last \d+ follow\]\n")


def parse_since(text, now=None):
    """'30m', '1h', '2d' back from now, or an ISO 8601 date or date and time (UTC when naive)."""
    now = now or timezone.now()
    relative = re.fullmatch(r"(\d+)\s*([smhdw])", text.strip())
    if relative:
        return now - timedelta(**{UNITS[relative[2]]: int(relative[1])})
    try:
        moment = parse_datetime(text)
        if moment is None and parse_date(text):
            moment = datetime.combine(parse_date(text), time())
    except ValueError:
        moment = None
    if moment is None:
        raise CommandError(f"--since {text!r}: give an ISO 8601 date or time, or an age such as 30m, 1h, 2d.")
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = "Run history, newest first."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing = sub.add_parser("list", help="Runs, newest first.")
        listing.add_argument("--job", help="Only the runs of the job with this name.")
        listing.add_argument("--status", choices=RunStatus.values, help="Only runs in this status.")
        listing.add_argument("--since", help="Only runs created since: ISO 8601, or an age such as 1h, 2d.")
        listing.add_argument("--limit", type=int, default=50, help="At most this many runs (default 50).")
        cancel = sub.add_parser("cancel", help="Cancel a queued, retrying or running run.")
        cancel.add_argument("id", type=int)
        tail = sub.add_parser("tail", help="Print a run's output as it comes until the run ends; exit 0 when it "
                                           "succeeded, 1 when not.")
        tail.add_argument("id", type=int)
        tail.add_argument("--interval", type=float, default=1.0, help="Seconds between looks (default 1).")

        pruning = sub.add_parser("prune", help="Delete finished runs past their job's retention policy.")
        pruning.add_argument("--dry-run", action="store_true", help="Only count what would be deleted.")
        pruning.add_argument("--job", help="Only the runs of the job with this name.")
        pruning.add_argument("--batch", type=int, help="Runs per DELETE (default JOBS_RETENTION_BATCH).")

    def handle(self, *args, action, **options):
        getattr(self, f"handle_{action}")(**options)

    def handle_cancel(self, id, **options):
        run = JobRun.objects.select_related("job").filter(pk=id).first()
        if run is None:
            raise CommandError(f"No run {id}.")
        if act(actions.cancel, run):
            self.stdout.write(f"Cancelled run {id} of {run.job.name}.")
        else:
            self.stdout.write(f"Run {id} is already {run.status}; nothing changed.")

    def handle_tail(self, id, interval=1.0, **options):
        run = JobRun.objects.select_related("job").filter(pk=id).first()
        if run is None:
            raise CommandError(f"No run {id}.")
        follower = Follower()
        while True:
            self.stdout.write(follower.follow(run), ending="")
            self.stdout.flush()
            if run.is_terminal:
                break
            clock.sleep(interval)
            run.refresh_from_db(fields=["status", "attempt", "output", "output_bytes", "error"])
        ended = f"Run {id} of {run.job.name} ended {run.status} (attempt {run.attempt})"
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"{ended}: {run.error or run.reason}", returncode=EXIT_FAILED)
        self.stderr.write(f"{ended}.")

    def handle_list(self, job=None, status=None, since=None, limit=50, **options):
        runs = JobRun.objects.select_related("job").defer("output", "result").order_by("-created_at", "-id")
        if job is not None:
            if not Job.objects.filter(name=job).exists():
                raise CommandError(f"No job named {job!r}. See `manage.py jobs list` for the names.")
            runs = runs.filter(job__name=job)
        if status:
            runs = runs.filter(status=status)
        if since:
            runs = runs.filter(created_at__gte=parse_since(since))
        if limit < 1:
            raise CommandError("--limit must be at least 1.")
        rows = [
            (r.pk, r.job.name, r.status, r.trigger, f"{r.attempt}/{r.max_attempts}", when(r.scheduled_for),
             when(r.started_at), format_duration(r.duration), r.worker or "-")
            for r in runs[:limit]
        ]
        if not rows:
            self.stdout.write("No runs.")
            return
        self.stdout.write(table(
            ["ID", "JOB", "STATUS", "TRIGGER", "ATTEMPT", "SCHEDULED FOR", "STARTED", "DURATION", "WORKER"], rows
        ))

    def handle_prune(self, job=None, dry_run=False, batch=None, **options):
        jobs = None if job is None else Job.objects.filter(name=job)
        if jobs is not None and not jobs.exists():
            raise CommandError(f"No job named {job!r}. See `manage.py jobs list` for the names.")
        if batch is not None and batch < 1:
            raise CommandError("--batch must be at least 1.")
        report = retention.prune(batch_size=batch, dry_run=dry_run, jobs=jobs)
        for job_name, count in sorted(report.per_job.items()):
            self.stdout.write(f"{job_name}: {count}")
        verb = "Would delete" if dry_run else "Deleted"
        line = f"{verb} {report.runs} runs of {len(report.per_job)} jobs ({report.jobs} checked)"
        if not dry_run:
            line += f", {report.task_results} task results, in {report.seconds:.1f} s"
            if report.skipped_batches:
                line += f"; {report.skipped_batches} batches met a lock and were left for the next pass"
        self.stdout.write(line + ".")


class Follower:
    """What is new in a run's output from one look to the next.

    The run keeps the tail of its current attempt's output (what the heartbeats saved) and the
    count of bytes written: the bytes past those already printed are new. A new attempt starts
    its output over; until it prints, the run still holds the earlier attempt's."""

    def __init__(self):
        self.attempt = None
        self.seen = 0
        self.left_over = None  # (output, bytes) of an earlier attempt, not to print again

    def follow(self, run):
        text = ""
        if self.attempt is not None and run.attempt != self.attempt:
            if run.status != RunStatus.RUNNING:  # the earlier attempt's output, complete now
                text += unseen(run.output, run.output_bytes, self.seen)
                self.left_over = (run.output, run.output_bytes)
            text += f"--- attempt {run.attempt} ---\n"
            self.seen = 0
        self.attempt = run.attempt
        if (run.output, run.output_bytes) != self.left_over:
            self.left_over = None
            text += unseen(run.output, run.output_bytes, self.seen)
            self.seen = max(self.seen, run.output_bytes)
        return text


def unseen(output, written, seen):
    """The end of ``output`` (the kept tail of ``written`` bytes) past its first ``seen`` bytes."""
    new = written - seen
    if new <= 0:
        return ""
    kept = DROPPED_LINE.sub("", output, count=1).encode()
    if new > len(kept):
        return f"[{new - len(kept)} bytes not kept]\n{kept.decode(errors='replace')}"
    return kept[len(kept) - new:].decode(errors="replace")
