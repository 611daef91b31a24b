"""manage.py sso list | link USER SUBJECT --issuer ISSUER | unlink USER

Single sign-on's identities (sso.models.Identity). Signing on never takes over a local account of the
same name; ``link`` lets an operator hand one to a person at the provider on purpose (their subject and
the provider's issuer are in the log line of the refused sign-on)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from jobs.management.commands.jobs import table

from ...models import Identity


class Command(BaseCommand):
    help = "List single sign-on's identities; link a local account to a person at the provider, or unlink one."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("list", help="Users made or linked by single sign-on: user, subject, issuer, last sign-on.")
        link = sub.add_parser("link", help="Let the person SUBJECT of the provider sign on as the existing USER.")
        link.add_argument("user")
        link.add_argument("subject", help="Their sub claim at the provider.")
        link.add_argument("--issuer", required=True, help="The provider's issuer (iss), as in its ID tokens.")
        unlink = sub.add_parser("unlink", help="Make USER a local account again: its person can no longer sign "
                                               "on as it.")
        unlink.add_argument("user")

    def handle(self, *args, action, **options):
        if action == "list":
            rows = [(i.user.get_username(), i.subject, i.issuer,
                     i.last_sign_on.strftime("%Y-%m-%d %H:%M UTC") if i.last_sign_on else "never")
                    for i in Identity.objects.select_related("user").order_by("user__username")]
            self.stdout.write(table(["user", "subject", "issuer", "last sign-on"], rows) if rows else "No identities.")
            return
        user = self.user(options["user"])
        if action == "link":
            subject, issuer = options["subject"].strip(), options["issuer"].strip()
            if not subject or not issuer:
                raise CommandError("SUBJECT and --issuer must not be empty.")
            with transaction.atomic():
                taken = Identity.objects.filter(issuer=issuer, subject=subject).select_related("user").first()
                if taken is not None:
                    raise CommandError(f"That subject already signs on as {taken.user.get_username()}.")
                if Identity.objects.filter(user=user).exists():
                    raise CommandError(f"{user.get_username()} is already linked; unlink it first.")
                Identity.objects.create(user=user, issuer=issuer, subject=subject)
            self.stdout.write(f"{subject} of {issuer} now signs on as {user.get_username()} (its password, if it "
                              "has one, still works).")
        elif action == "unlink":
            if not Identity.objects.filter(user=user).delete()[0]:
                raise CommandError(f"{user.get_username()} is not linked.")
            self.stdout.write(f"{user.get_username()} is a local account again.")

    @staticmethod
    def user(name):
        try:
            return get_user_model().objects.get(username=name)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {name!r}.") from None
