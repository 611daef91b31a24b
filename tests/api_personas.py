"""People and a job for the API tests: the job's owner, a teammate in the job's group, an outsider
in another group, a staff member, and a runner (in the job's group and in "Command job runners")."""

from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from jobs.actions.permissions import COMMAND_RUNNERS_GROUP
from jobs.definitions.jobs import save_job
from jobs.models import Job


@dataclass
class Personas:
    owner: User
    teammate: User
    outsider: User
    staff: User
    team: Group
    job: Job
    runner: User = None

    def client(self, user):
        client = APIClient()
        client.force_authenticate(user)
        return client

    def staff_post_refused(self, path, body, field, model):
        """Staff's POST of ``body`` to ``path`` answers 400 naming ``field``, and makes no ``model``."""
        response = self.client(self.staff).post(path, body, format="json")
        assert response.status_code == 400
        assert field in response.json(), response.json()
        assert not model.objects.exists()


def browser(user):
    """A client of the pages, logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def make_personas():
    team, others = Group.objects.create(name="team"), Group.objects.create(name="others")
    owner = User.objects.create_user("owner")
    teammate = User.objects.create_user("teammate")
    outsider = User.objects.create_user("outsider")
    staff = User.objects.create_user("staff", is_staff=True)
    owner.groups.add(team)
    teammate.groups.add(team)
    outsider.groups.add(others)
    job = save_job(Job(name="nightly-report", kind="callable", target="builtin.echo", owner=owner, group=team,
                       tags=["reports"]), {"type": "cron", "cron": "0 3 * * *", "timezone": "Europe/Berlin"})
    runner = User.objects.create_user("runner")
    runner.groups.add(team, Group.objects.get(name=COMMAND_RUNNERS_GROUP))
    return Personas(owner, teammate, outsider, staff, team, job, runner)
