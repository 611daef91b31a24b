"""manage.py audit verify: walk the trail's hash chain (audit.chain) and say OK with the count, or
name the first entry changed or missing and exit 1."""

from django.core.management.base import BaseCommand, CommandError

from audit import retention


class Command(BaseCommand):
    help = "Check the audit trail's hash chain: names the first entry changed or missing."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("verify", help="Walk the chain from its start (or the last pruning's anchor) to the newest "
                                      "entry.")

    def handle(self, *args, action, **options):
        verdict = retention.verify()
        if not verdict.ok:
            raise CommandError(f"Audit trail broken after {verdict.count} good entries: {verdict.problem}.")
        head = f", newest hash {verdict.head}" if verdict.head else ""
        self.stdout.write(f"OK: {verdict.count} entries chained{head}.")
