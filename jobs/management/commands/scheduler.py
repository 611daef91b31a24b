"""manage.py scheduler status: the leader, the jobs due next, and the last hour's runs."""

from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db.models import Count
from django.utils import timezone

from jobs.models import Job, JobRun, RunStatus
from jobs.scheduling.leader import current_leader
from jobs.worker import watchdog

from .jobs import when


class Command(BaseCommand):
    help = "The state of the scheduler."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("status", help="The leader, whether a scheduler ticks (and since when not), enabled jobs, the next due job, runs in the last hour.")

    def handle(self, *args, action, **options):
        now = timezone.now()
        self.stdout.write(f"leader: {self.leader_line(now)}")
        seen = watchdog.health()
        self.stdout.write(f"scheduler: {watchdog.outage_text(seen)}")
        if seen["outage"]:
            outage = seen["outage"]
            self.stdout.write(f"outage: noticed at {when(outage.noticed_at)} by {outage.noticed_by or 'a worker'}, "
                              "scheduler_down alerted")

        enabled = Job.objects.filter(enabled=True)
        self.stdout.write(f"enabled jobs: {enabled.count()} (of {Job.objects.count()})")
        due = enabled.filter(next_run_at__isnull=False).order_by("next_run_at").first()
        if due is None:
            self.stdout.write("next due job: none")
        else:
            late = " (overdue)" if due.next_run_at <= now else ""
            self.stdout.write(f"next due job: {due.name} at {when(due.next_run_at)}{late}")

        counts = dict(
            JobRun.objects.filter(created_at__gte=now - timedelta(hours=1))
            .values_list("status").annotate(n=Count("id")).order_by()
        )
        self.stdout.write(f"runs in the last hour: {sum(counts.values())}")
        for status in RunStatus.values:
            if counts.get(status):
                self.stdout.write(f"  {status}: {counts[status]}")

    def leader_line(self, now):
        leader = current_leader()
        if not leader:
            return "none (no scheduler holds the lease)"
        since = leader["since"]
        return f"{leader['node']} since {when(since)} ({int((now - since).total_seconds())}s ago)"
