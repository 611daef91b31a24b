"""manage.py tokens list [USER] | create USER [--days N] | revoke PREFIX [--user USER]

API tokens (``Authorization: Token <key>``, for the API and jobsctl): a key is printed once, when it
is made; only its hash is kept (jobs.access.tokens). Making and revoking one is in the audit trail."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from jobs.access import tokens
from jobs.actions import tokens as token_actions
from jobs.actions.jobs import Actor

from .jobs import table


def when(moment):
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "never"


class Command(BaseCommand):
    help = "List, make and revoke API tokens (the key is shown once, when it is made)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing = sub.add_parser("list", help="Tokens not yet expired: prefix, user, made, expires.")
        listing.add_argument("user", nargs="?", help="Only this user's.")
        create = sub.add_parser("create", help="Make a token for USER and print its key.")
        create.add_argument("user")
        create.add_argument("--days", type=int, default=None,
                            help="Days until it expires (0: never; default API_TOKEN_TTL_DAYS).")
        revoke = sub.add_parser("revoke", help="Revoke the token whose key starts with PREFIX (its first 15 "
                                               "characters, as listed).")
        revoke.add_argument("prefix")
        revoke.add_argument("--user", help="Only if it is this user's.")

    def handle(self, *args, action, **options):
        user = self.user(options.get("user"))
        if action == "list":
            rows = [(t.token_key, t.user.get_username(), when(t.created), when(t.expiry))
                    for t in tokens.live().filter(**({"user": user} if user else {})).select_related("user")]
            self.stdout.write(table(["prefix", "user", "made", "expires"], rows) if rows else "No tokens.")
        elif action == "create":
            if options["days"] is not None and options["days"] < 0:
                raise CommandError("--days must be 0 (never expires) or more.")
            try:
                token, key = token_actions.create(Actor.command_line(), user, options["days"])
            except tokens.TooManyTokens as refused:
                raise CommandError(str(refused)) from None
            self.stdout.write(key)
            self.stderr.write(f"A token for {user.get_username()}, expires {when(token.expiry)}. The key is shown "
                              "this once: keep it in JOBSCTL_TOKEN or jobsctl's config file.")
        elif action == "revoke":
            if not token_actions.revoke(Actor.command_line(), options["prefix"], user):
                raise CommandError(f"No token starts with {options['prefix']!r}"
                                   f"{' for ' + user.get_username() if user else ''}.")
            self.stdout.write(f"Revoked {options['prefix']}.")

    @staticmethod
    def user(name):
        if not name:
            return None
        try:
            return get_user_model().objects.get_by_natural_key(name)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {name!r}.") from None
