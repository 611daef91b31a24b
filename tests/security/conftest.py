"""The people of the security suite: an owner and a teammate (group "team"), an outsider (group
"others"), a staff member without any permission, and a runner (in "team" and in "Command job
runners"); one job, run, workflow and workflow run of the owner's."""

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.actions.permissions import COMMAND_RUNNERS_GROUP
from jobs.definitions.jobs import save_job
from jobs.models import Job

from .servers import Target


class People:
    def __init__(self):
        self.team, self.others = Group.objects.create(name="team"), Group.objects.create(name="others")
        self.owner = User.objects.create_user("owner")
        self.teammate = User.objects.create_user("teammate")
        self.outsider = User.objects.create_user("outsider")
        self.staff = User.objects.create_user("staff", is_staff=True)
        self.runner = User.objects.create_user("runner")
        self.owner.groups.add(self.team)
        self.teammate.groups.add(self.team)
        self.outsider.groups.add(self.others)
        self.runner.groups.add(self.team, Group.objects.get(name=COMMAND_RUNNERS_GROUP))

    def api(self, user):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client


def member_of(group_name, username):
    """A new user of that name, in the group of that name (made if there is none)."""
    user = User.objects.create_user(username)
    user.groups.add(Group.objects.get_or_create(name=group_name)[0])
    return user


@pytest.fixture
def people(db):
    return People()


@pytest.fixture
def owned_job(people):
    return save_job(Job(name="owners-job", kind="callable", target="builtin.noop", owner=people.owner,
                        group=people.team), {"type": "manual"})


@pytest.fixture
def owned_run(owned_job):
    return lifecycle.create_run(owned_job)


@pytest.fixture
def inside():
    """A server on 127.0.0.1: the service's own side of the network, which jobs must not reach."""
    server = Target("127.0.0.1")
    yield server
    server.close()


@pytest.fixture
def outside():
    """A server on 127.0.0.2, the one address the tests allow (JOBS_HTTP_ALLOWED_NETWORKS): it
    stands for the public internet."""
    server = Target("127.0.0.2")
    yield server
    server.close()


@pytest.fixture
def only_outside_allowed(settings, monkeypatch):
    settings.JOBS_HTTP_ALLOWED_NETWORKS = ["127.0.0.2/32"]
    monkeypatch.setenv("JOBS_HTTP_ALLOWED_NETWORKS", "127.0.0.2/32")
