"""manage.py secrets new-key | rotate

``new-key`` prints a Fernet key for JOBS_SECRETS_KEYS. ``rotate`` encrypts every stored secret
value again with the first key of JOBS_SECRETS_KEYS (the jobs', and the other apps' registered with
``jobs.access.secrets.register_holder``: the notification channels'): put a new key first, keep the old
ones after it, run ``rotate``, then remove the old keys. The audit trail records each rotation."""

from django.core.management.base import BaseCommand, CommandError

from jobs.access import secrets
from jobs.actions import jobs as actions


class Command(BaseCommand):
    help = "Make a key for JOBS_SECRETS_KEYS, or encrypt every stored secret again with its first key."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("new-key", help="Print a new Fernet key.")
        sub.add_parser("rotate", help="Encrypt every stored secret value (jobs, channels) again with the first key.")

    def handle(self, *args, action, **options):
        if action == "new-key":
            self.stdout.write(secrets.new_key())
            return
        try:
            counts = actions.rotate_secrets(actions.Actor.command_line())
        except actions.ActionError as exc:
            raise CommandError(exc.message) from None
        done = ", ".join(f"{count} {'job' if name == 'jobs' else name.rstrip('s')}(s)" for name, count in counts.items())
        self.stdout.write(f"Encrypted the secret values of {done} again with the first key.")
