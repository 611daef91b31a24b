"""manage.py provider_setup: a signing key, one confidential client and the given users."""

from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand
from oidc_provider.models import Client, ResponseType


class Command(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("--client-id", required=True)
        parser.add_argument("--client-secret", required=True)
        parser.add_argument("--redirect-uri", required=True)
        parser.add_argument("--user", action="append", default=[],
                            help="name:password:email:group1,group2 (repeatable)")

    def handle(self, *args, client_id, client_secret, redirect_uri, user, **options):
        call_command("creatersakey")
        client = Client.objects.create(name="Scheduler", client_type="confidential", client_id=client_id,
                                       client_secret=client_secret, jwt_alg="RS256", require_consent=True,
                                       reuse_consent=False, _redirect_uris=redirect_uri)
        client.response_types.add(ResponseType.objects.get(value="code"))
        for spec in user:
            name, password, email, groups = spec.split(":", 3)
            person = User.objects.create_user(name, email=email, password=password)
            person.groups.set(Group.objects.get_or_create(name=group)[0] for group in groups.split(",") if group)
