"""jobsctl windows against a live service (a real gunicorn web process, jobsctl run as a
subprocess): a user sets, lists, shows, changes and deletes a window; bad input is the API's 400."""

import json

import pytest
from django.contrib.auth.models import User

from jobs.access import tokens
from jobs.models import Window

from .test_cli import lines

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def token(transactional_db):
    return tokens.create(User.objects.create_user("someone"))[1]


def test_a_user_sets_lists_shows_changes_and_deletes_a_window(jobsctl, token):
    made = jobsctl("windows", "set", "sunday-night", "--cron", "0 2 * * 0", "--duration-seconds", "7200",
                   "--timezone", "Europe/Berlin", "--tag", "reports", "--mode", "mute", token=token)
    assert (made.returncode, made.stdout) == (
        0, "sunday-night: mute, 0 2 * * 0 (Europe/Berlin) for 7200 s; jobs: -; tags: reports\n"), made.stderr
    changed = jobsctl("windows", "set", "sunday-night", "--mode", "hold", "--json", token=token)
    assert json.loads(changed.stdout)["mode"] == "hold"
    listed = jobsctl("windows", "list", token=token)
    assert lines(listed.stdout)[1].split()[1:3] == ["sunday-night", "hold"]

    refused = jobsctl("windows", "set", "sunday-night", "--duration-seconds", "0", token=token)
    assert refused.returncode != 0 and "duration_seconds" in refused.stderr, refused.stderr
    assert Window.objects.get().duration_seconds == 7200

    deleted = jobsctl("windows", "delete", "sunday-night", token=token)
    assert (deleted.returncode, deleted.stdout) == (0, "Window sunday-night deleted.\n")
    assert jobsctl("windows", "show", "sunday-night", token=token).returncode == 3
