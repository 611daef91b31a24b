"""manage.py secrets new-key | rotate

``new-key`` prints a Fernet key for JOBS_SECRETS_KEYS. ``rotate`` encrypts every job's secret
values again with the first key of JOBS_SECRETS_KEYS: put a new key first, keep the old ones after
it, run ``rotate``, then remove the old keys."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from jobs import secrets
from jobs.models import Job


class Command(BaseCommand):
    help = "Make a key for JOBS_SECRETS_KEYS, or encrypt every stored secret again with its first key."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("new-key", help="Print a new Fernet key.")
        sub.add_parser("rotate", help="Encrypt every job's secret values again with the first key.")

    def handle(self, *args, action, **options):
        if action == "new-key":
            self.stdout.write(secrets.new_key())
            return
        if secrets.fernet() is None:
            raise CommandError("JOBS_SECRETS_KEYS is not set.")
        count = 0
        with transaction.atomic():
            for job in Job.objects.select_for_update().only("pk", *secrets.FIELDS):
                values = {name: getattr(job, name) for name in secrets.FIELDS}
                if not any(values.values()):
                    continue
                try:
                    rotated = {name: secrets.rotate(value) for name, value in values.items()}
                except secrets.SecretsUnavailable as exc:
                    raise CommandError(f"job {job.pk}: {exc} Nothing was changed.") from None
                Job.objects.filter(pk=job.pk).update(**rotated)
                count += 1
        self.stdout.write(f"Encrypted the secret values of {count} job(s) again with the first key.")
