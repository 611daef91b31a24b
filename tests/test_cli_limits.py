"""jobsctl limits against a live service (a real gunicorn web process, jobsctl installed and run as
a subprocess): staff set, list, show and delete limits; others read them and are refused a change."""

import json

import pytest
from django.contrib.auth.models import User

from audit.models import AuditEntry, Subject
from jobs.access import tokens
from jobs.models import Limit

from .test_cli import lines

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def people(transactional_db):
    staff = User.objects.create_user("boss", is_staff=True)
    other = User.objects.create_user("someone")
    return {"staff": tokens.create(staff)[1], "other": tokens.create(other)[1]}


def test_staff_set_list_show_and_delete_a_limit(jobsctl, people):
    made = jobsctl("limits", "set", "warehouse", "--max-running", "3", token=people["staff"])
    assert (made.returncode, made.stdout) == (0, "warehouse: 0 of 3 running; 0 waiting; named by 0 job(s)\n"), made.stderr
    changed = jobsctl("limits", "set", "warehouse", "--max-starts-per-minute", "20", "--json", token=people["staff"])
    assert json.loads(changed.stdout)["max_starts_per_minute"] == 20
    assert Limit.objects.get(key="warehouse").max_running == 3
    assert jobsctl("limits", "show", "warehouse", token=people["other"]).returncode == 3  # staff's own
    Limit.objects.filter(key="warehouse").update(shared=True)  # as staff share one in the admin or the API

    listed = jobsctl("limits", "list", token=people["other"])
    assert lines(listed.stdout)[1].split() == ["warehouse", "0", "3", "20", "0", "0"]
    shown = jobsctl("limits", "show", "warehouse", token=people["other"])
    assert shown.stdout == "warehouse: 0 of 3 running, at most 20 starts a minute; 0 waiting; named by 0 job(s)\n"

    refused = jobsctl("limits", "set", "warehouse", "--max-running", "30", token=people["other"])
    assert refused.returncode == 4 and "Only staff" in refused.stderr
    bad = jobsctl("limits", "set", "lake", "--max-running", "0", token=people["staff"])
    assert bad.returncode == 6 and "max_running" in bad.stderr
    unknown = jobsctl("limits", "show", "lake", token=people["other"])
    assert (unknown.returncode, unknown.stderr) == (3, "jobsctl: no limit 'lake'; jobsctl limits list shows them.\n")

    assert jobsctl("limits", "delete", "warehouse", token=people["staff"]).returncode == 0
    assert not Limit.objects.exists()
    assert AuditEntry.objects.filter(subject=Subject.LIMIT).count() == 3
