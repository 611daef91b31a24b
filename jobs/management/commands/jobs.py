"""manage.py jobs list | show NAME | run NAME [--wait] | pause NAME | resume NAME
| export FILE | apply FILE [--dry-run] [--prune] | backfill NAME --from --to [--dry-run]
| slots NAME [--from --to] | why NAME AT
| import celery-beat [--disable-originals] | import crontab FILE | import cronjob FILE (each [--dry-run] [--team TEAM])

``--as USER`` (before the action) acts as that user: only their jobs are seen, command jobs and
queues need their rights, and the audit trail names them. Without it the command line is the
operator's, who holds the service's own credentials anyway."""

import functools
import sys
import time
from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs import collector, kinds, parameters
from jobs.actions import jobs as actions
from jobs.actions.permissions import visible_jobs
from jobs.as_code import files as as_code
from jobs.as_code import importers
from jobs.as_code.importers import celery_beat, cronjob, crontab
from jobs.definitions import jobs as definitions
from jobs.models import Job, RunStatus, ScheduleType
from jobs.operations import slot_report

EXIT_FAILED = 1
EXIT_WAIT_TIMED_OUT = 2


def table(headers, rows):
    """A plain text table, columns padded to their widest cell."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def when(moment):
    return moment.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def format_duration(delta):
    return f"{delta.total_seconds():.1f}s" if delta is not None else "-"


def moment(text, option):
    """An ISO 8601 date and time from the command line; without an offset it is UTC."""
    try:
        parsed = parse_datetime(text.strip())
    except ValueError:
        parsed = None
    if parsed is None or not 1900 <= parsed.year <= 9000:
        raise CommandError(f"{option}: {text!r} is not an ISO 8601 date and time, such as 2026-11-21T00:00Z.")
    return timezone.make_aware(parsed, UTC) if timezone.is_naive(parsed) else parsed


def range_errors(fields):
    """{field: messages} of a range (start, end) as the options that gave it."""
    return "; ".join(f"{'--from' if name == 'start' else '--to' if name == 'end' else name}: {' '.join(msgs)}"
                     for name, msgs in fields.items())


def act(action, *args, user=None, **kwargs):
    """Take an action (``jobs.actions``) as the command line's actor (with ``--as``, as that user); a
    refusal is a CommandError."""
    try:
        return action(actions.Actor.command_line(user), *args, **kwargs)
    except actions.ActionError as exc:
        raise CommandError(exc.message) from None


def param_values(texts):
    """``--param NAME=VALUE`` options as {name: text} (the action types and checks them)."""
    try:
        return parameters.parse_assignments(texts)
    except ValidationError as exc:
        raise CommandError(" ".join(exc.messages)) from None


def first_or_error(found, message):
    """The first of the queryset ``found``, or a CommandError saying ``message`` when it is empty."""
    first = found.first()
    if first is None:
        raise CommandError(message)
    return first


def find_job(name, user=None):
    jobs = visible_jobs(user) if user else Job.objects
    return first_or_error(jobs.select_related("crontab", "interval", "clocked", "last_run", "owner").filter(name=name),
                          f"No job named {name!r}. See `manage.py jobs list` for the names.")


def wait_until_ended(run, timeout, called):
    """Read ``run`` (a run, or a workflow run) again until it has ended; after ``timeout`` seconds, a
    CommandError (exit EXIT_WAIT_TIMED_OUT) naming it as ``called``."""
    deadline = time.monotonic() + timeout
    while not run.is_terminal:
        if time.monotonic() > deadline:
            raise CommandError(f"{called} {run.pk} is still {run.status} after {timeout:g}s.",
                               returncode=EXIT_WAIT_TIMED_OUT)
        time.sleep(0.5)
        run.refresh_from_db()


def resolve_user(username):
    """The user named by --as, or None for the operator."""
    if username is None:
        return None
    from django.contrib.auth import get_user_model

    return first_or_error(get_user_model().objects.filter(username=username, is_active=True),
                          f"--as: no active user named {username!r}.")


class Command(BaseCommand):
    help = "List, show, run, pause and resume jobs; export them to a file and apply a file."

    def add_arguments(self, parser):
        parser.add_argument("--as", dest="acting_user", metavar="USER",
                            help="Act as this user: their jobs only, with their permissions.")
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("list", help="All jobs with their schedule, next run and last run.")
        show = sub.add_parser("show", help="One job: its fields, schedule, next and last runs.")
        show.add_argument("name")
        run = sub.add_parser("run", help="Run a job now (a manual run).")
        run.add_argument("name")
        run.add_argument("--wait", action="store_true",
                         help="Wait for the run to finish; exit 0 if it succeeded, 1 if not, 2 on timeout.")
        run.add_argument("--timeout", type=float, default=600.0, help="Seconds to wait with --wait.")
        run.add_argument("--param", dest="params", action="append", default=[], metavar="NAME=VALUE",
                         help="A value of one of the job's parameters (repeatable); the defaults fill the rest.")
        for action in ("pause", "resume"):
            sub.add_parser(action, help=f"{action.capitalize()} a job's schedule.").add_argument("name")
        export = sub.add_parser("export", help="Write every job to a .yaml/.yml/.json file (- for stdout). "
                                               "Fields equal to their default are left out.")
        export.add_argument("file")
        apply = sub.add_parser("apply", help="Make the jobs in the database match a .yaml/.yml/.json file "
                                             "(- for YAML on stdin), in one transaction.")
        apply.add_argument("file")
        apply.add_argument("--dry-run", action="store_true", help="Print the plan and check it; save nothing.")
        apply.add_argument("--prune", action="store_true", help="Delete the jobs that are not in the file.")
        fill = sub.add_parser("backfill", help="Create the runs of every slot in a past range [--from, --to); "
                                               "slots that already have a run are left alone.")
        fill.add_argument("name")
        fill.add_argument("--from", dest="start", required=True, help="ISO 8601; UTC unless an offset is given.")
        fill.add_argument("--to", dest="end", required=True, help="ISO 8601, excluded; UTC unless an offset is given.")
        fill.add_argument("--dry-run", action="store_true", help="List the slots; create nothing.")
        fill.add_argument("--param", dest="params", action="append", default=[], metavar="NAME=VALUE",
                          help="A value of one of the job's parameters each run gets (repeatable).")
        slots = sub.add_parser("slots", help="Every slot of a range and what became of it (default: the last 24 h).")
        slots.add_argument("name")
        slots.add_argument("--from", dest="start", help="ISO 8601; default 24 hours ago.")
        slots.add_argument("--to", dest="end", help="ISO 8601, excluded; default now.")
        self.add_import(sub)
        why = sub.add_parser("why", help="Why did (or didn't) the job run at a moment? One line.")
        why.add_argument("name")
        why.add_argument("at", help="ISO 8601; UTC unless an offset is given.")

    def add_import(self, sub):
        imports = sub.add_parser("import", help="Make jobs of django-celery-beat's periodic tasks, a crontab file "
                                                "or a Kubernetes CronJob manifest, and report what could not carry over.")
        source = imports.add_subparsers(dest="source", required=True, metavar="SOURCE")
        beat = source.add_parser("celery-beat", help="Every PeriodicTask row; the service's own tasks are left to beat.")
        beat.add_argument("--disable-originals", action="store_true",
                          help="Disable the rows that became jobs, in the import's transaction: nothing runs twice.")
        cron = source.add_parser("crontab", help="A crontab file (crontab -l), its environment lines, CRON_TZ and MAILTO.")
        cron.add_argument("file", help="The file, or - for stdin.")
        cron.add_argument("--timezone",
                          help="The zone of the lines before any CRON_TZ (cron's is its host's): default UTC.")
        cron.add_argument("--prefix", default="cron", help="The start of the jobs' names (default: cron).")
        kube = source.add_parser("cronjob", help="A Kubernetes CronJob manifest (one or more documents, or a List).")
        kube.add_argument("file", help="The file, or - for stdin.")
        for parser in (beat, cron, kube):
            parser.add_argument("--dry-run", action="store_true", help="Report and check everything; save nothing.")
            parser.add_argument("--team", help="A group (team) the jobs are shared with, as a jobs file's group.")

    def handle(self, *args, action, acting_user=None, **options):
        self.user = resolve_user(acting_user)
        getattr(self, f"handle_{action}")(**options)

    def handle_list(self, **options):
        jobs = (visible_jobs(self.user) if self.user else Job.objects).select_related(
            "crontab", "interval", "clocked", "last_run").defer(
            "last_run__output", "last_run__result", "last_run__error").order_by("name")
        rows = [
            (job.name, job.kind, job.describe_schedule(), "yes" if job.enabled else "no",
             when(job.next_run_at) if job.enabled else "- (paused)",
             job.last_run.status if job.last_run else "-")
            for job in jobs
        ]
        self.stdout.write(table(["NAME", "KIND", "SCHEDULE", "ENABLED", "NEXT RUN", "LAST RUN"], rows) if rows
                          else "No jobs.")

    def handle_show(self, name, **options):
        job = find_job(name, self.user)
        fields = [
            ("name", job.name), ("description", job.description or "-"), ("owner", job.owner or "-"),
            ("tags", job.tags), ("kind", job.kind), ("target", job.target),
        ]
        if spec := kinds.get(job.kind):
            fields += spec.described(job)
        fields += [
            ("schedule", job.describe_schedule()), ("schedule object", definitions.schedule_of(job)),
            ("enabled", job.enabled), ("catchup", f"{job.catchup_policy} (max {job.catchup_max})"),
            ("overlap_policy", job.overlap_policy),
            ("start_deadline_seconds", job.start_deadline_seconds or "-"),
            ("jitter_seconds", job.jitter_seconds),
            ("queue", job.effective_queue), ("max_retries", job.max_retries),
            ("retry_backoff", f"{job.retry_backoff_seconds:g}s, at most {job.retry_backoff_max_seconds:g}s, "
                              f"jitter {'on' if job.retry_jitter else 'off'}"),
            ("timeout_seconds", job.timeout_seconds), ("sla_seconds", job.sla_seconds or "-"),
            ("next_run_at", when(job.next_run_at)),
        ]
        width = max(len(label) for label, _ in fields)
        for label, value in fields:
            self.stdout.write(f"{label.ljust(width)}  {value}")

        self.stdout.write("\nNext 5 runs:")
        zone = ZoneInfo(str(job.crontab.timezone)) if job.schedule_type == ScheduleType.CRON else None
        slots = job.upcoming_slots(5) if job.enabled else []
        for slot in slots:
            local = f"  ({slot.astimezone(zone).strftime('%Y-%m-%d %H:%M:%S %Z')})" if zone else ""
            self.stdout.write(f"  {when(slot)}{local}")
        if not slots:
            self.stdout.write("  none" + ("" if job.enabled else " (paused)"))

        self.stdout.write("\nLast 5 runs:")
        recent = list(job.runs.defer("output", "result").order_by("-created_at", "-id")[:5])
        if not recent:
            self.stdout.write("  none")
            return
        self.stdout.write(table(
            ["ID", "STATUS", "TRIGGER", "ATTEMPT", "SCHEDULED FOR", "DURATION", "WORKER"],
            [(r.pk, r.status, r.trigger, f"{r.attempt}/{r.max_attempts}", when(r.scheduled_for),
              format_duration(r.duration), r.worker or "-") for r in recent],
        ))

    def handle_run(self, name, wait, timeout, params=(), **options):
        job = find_job(name, self.user)
        run = act(actions.run_now, job, param_values(params), user=self.user)
        self.stdout.write(f"Run {run.pk} of {job.name} queued.")
        if not wait:
            return
        wait_until_ended(run, timeout, "Run")
        self.stdout.write(f"status: {run.status}")
        self.stdout.write(f"attempts: {run.attempt}/{run.max_attempts}")
        self.stdout.write(f"worker: {run.worker or '-'}")
        self.stdout.write(f"duration: {format_duration(run.duration)}")
        if run.result is not None:
            self.stdout.write(f"result: {run.result}")
        self.stdout.write("output:" + (f"\n{run.output}" if run.output else " (none)"))
        if run.error:
            self.stdout.write(f"error: {run.error}")
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"Run {run.pk} ended {run.status}.", returncode=EXIT_FAILED)

    def handle_pause(self, name, **options):
        job = act(actions.pause, find_job(name, self.user), user=self.user)
        self.stdout.write(f"Paused {job.name}.")

    def handle_resume(self, name, **options):
        job = act(actions.resume, find_job(name, self.user), user=self.user)
        self.stdout.write(f"Resumed {job.name}; next run {when(job.next_run_at)}.")


    def handle_export(self, file, **options):
        try:
            text = as_code.export_text(as_code.format_of(file), actions.Actor.command_line(self.user))
        except as_code.JobFileError as exc:
            raise CommandError(str(exc)) from None
        if file == "-":
            self.stdout.write(text, ending="")
            return
        with open(file, "w", encoding="utf-8") as out:
            out.write(text)
        self.stdout.write(f"Exported {Job.objects.count()} jobs to {file}.")

    def handle_apply(self, file, dry_run, prune, **options):
        token = as_code.PROGRESS.set(self.stderr.write)  # a long apply says how far it got
        try:
            self.apply(file, dry_run, prune)
        finally:
            as_code.PROGRESS.reset(token)

    @collector.paused()  # the file's entries, its plan and its lines live until it is applied
    def apply(self, file, dry_run, prune):
        actor = actions.Actor.command_line(self.user)
        try:
            fmt = as_code.format_of(file)
            if file == "-":
                text = sys.stdin.read()
            else:
                with open(file, encoding="utf-8") as source:
                    text = source.read()
            plan = as_code.plan_file(as_code.read_entries(text, fmt), actor, prune=prune)
            for line in plan.lines():
                self.stdout.write(line)
            if plan.is_empty:
                self.stdout.write("no changes")
                return
            as_code.apply_plan(plan, actor, dry_run=dry_run)
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        except as_code.JobFileError as exc:
            raise CommandError(f"{file}: nothing was applied:\n{exc}") from None
        if dry_run:
            self.stdout.write("dry run: the plan is valid; nothing was saved.")
        else:
            self.stdout.write("applied: {} created, {} updated, {} deleted.".format(*plan.counts()))

    def handle_import(self, source, dry_run, team=None, disable_originals=False, file=None, **options):
        actor = actions.Actor.command_line(self.user)
        then = None
        progress = as_code.PROGRESS.set(self.stderr.write)  # a long import says how far it got
        try:
            if source == "celery-beat":
                self.may_import_periodic_tasks(disable_originals)
                imported, carried = celery_beat.read(timezone.now())
                if disable_originals:
                    names = celery_beat.enabled_among(carried)
                    imported.notes.append(f"disables {len(names)} PeriodicTask row(s): {', '.join(names) or 'none'}.")
                    then = functools.partial(celery_beat.disable, carried)
            else:
                text = importers.read_text(file, sys.stdin)
                if source == "crontab":
                    imported = crontab.read(text, actor, zone=options["timezone"], prefix=options["prefix"])
                else:
                    imported = cronjob.read(text)
            for line in imported.report():
                self.stdout.write(line)
            plan = importers.apply(imported, actor, dry_run=dry_run, then=then, team=team)
        except as_code.JobFileError as exc:
            raise CommandError(f"{file or source}: nothing was imported:\n{exc}") from None
        finally:
            as_code.PROGRESS.reset(progress)
        for line in plan.lines():
            self.stdout.write(line)
        if dry_run:
            self.stdout.write("dry run: the import is valid; nothing was saved.")
        else:
            made = ", ".join(f"{section.counts()[0]} {key}" for key, section in plan.sections.items())
            self.stdout.write(f"imported: {made} created.")  # nothing that exists is changed

    def may_import_periodic_tasks(self, disable):
        """With --as, reading the periodic tasks needs the permission to view them, disabling them to change them."""
        needed = "django_celery_beat.change_periodictask" if disable else "django_celery_beat.view_periodictask"
        if self.user is not None and not self.user.has_perm(needed):
            raise CommandError(f"--as {self.user.get_username()}: importing periodic tasks"
                               f"{' and disabling them' if disable else ''} needs the permission {needed}.")

    def handle_backfill(self, name, start, end, dry_run, params=(), **options):
        job = find_job(name, self.user)
        start, end = moment(start, "--from"), moment(end, "--to")
        try:
            found = actions.backfill(actions.Actor.command_line(self.user), job, start, end, dry_run=dry_run,
                                     params=param_values(params))
        except actions.ActionError as exc:
            raise CommandError(range_errors(exc.fields) if exc.kind == exc.INVALID else exc.message) from None
        for slot in found.slots:
            run_id = found.existing.get(slot)
            self.stdout.write(f"  {when(slot)}  " + (f"has run {run_id}" if run_id else
                                                      "to create" if dry_run else "created"))
        if dry_run:
            self.stdout.write(f"dry run: {len(found.slots)} slots, {len(found.missing)} would be created; "
                              "nothing was saved.")
            return
        self.stdout.write(f"backfilled: {len(found.created)} runs created, {len(found.existing)} slots already had one.")

    def handle_slots(self, name, start, end, **options):
        job = find_job(name, self.user)
        now = timezone.now()
        end = moment(end, "--to") if end else now
        start = moment(start, "--from") if start else end - timedelta(hours=24)
        try:
            report = slot_report.build(job, start, end, now=now)
        except ValidationError as exc:
            raise CommandError(range_errors(exc.message_dict)) from None
        if report.checked_from > start:
            self.stdout.write(f"(slots before {when(report.checked_from)} are not checked: the job was created "
                              "or its schedule changed then)")
        if not report.slots:
            self.stdout.write("No slots in the range.")
            return
        self.stdout.write(table(["SLOT", "OUTCOME", "RUN", "REASON"], [
            (when(slot.at), slot.outcome, f"{slot.run.pk} ({slot.run.status})" if slot.run else "-", slot.reason or "-")
            for slot in report.slots]))
        counts = ", ".join(f"{report.count(o)} {o}" for o in ("ran", "skipped", "missing", "due", "upcoming"))
        self.stdout.write(counts)
        if report.missing:
            raise CommandError(f"{len(report.missing)} slot(s) missing: the periodic check raises a 'missed' alert.",
                               returncode=EXIT_FAILED)

    def handle_why(self, name, at, **options):
        job = find_job(name, self.user)
        try:
            self.stdout.write(slot_report.explain(job, moment(at, "AT")))
        except ValidationError as exc:
            raise CommandError(range_errors(exc.message_dict)) from None
