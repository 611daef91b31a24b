"""``jobsctl calendars`` against a live web process: list, show, import an ICS file (staff), and the
refusals (a user who is not staff, a file that is not a calendar)."""

import json

import pytest
from django.contrib.auth.models import User

from jobs.access import tokens as api_tokens
from jobs.models import Calendar

from .test_calendars_api import ICS

pytestmark = pytest.mark.timeout(300)


def test_jobsctl_lists_shows_and_imports_calendars(jobsctl, tmp_path):
    staff = api_tokens.create(User.objects.create_user("ops", is_staff=True))[1]
    owner = api_tokens.create(User.objects.create_user("owner"))[1]
    Calendar.objects.create(name="de-be", country="DE", subdivision="BE", shared=True,
                            dates=[{"date": "2026-12-24", "label": "Christmas Eve"}])
    listed = jobsctl("calendars", "list", token=owner)
    assert listed.returncode == 0, listed.stderr
    assert "de-be" in listed.stdout and "DE-BE" in listed.stdout
    shown = jobsctl("calendars", "show", "de-be", token=owner)
    assert "2026-12-24  Christmas Eve" in shown.stdout and "Christmas Day" in shown.stdout
    ics = tmp_path / "closures.ics"
    ics.write_text(ICS)

    refused = jobsctl("calendars", "import", "de-be", str(ics), token=owner)
    imported = jobsctl("calendars", "import", "de-be", str(ics), "--json", token=staff)
    (tmp_path / "bad.ics").write_text("not a calendar")
    bad = jobsctl("calendars", "import", "de-be", str(tmp_path / "bad.ics"), token=staff)

    assert refused.returncode != 0 and "Only staff may change or delete a shared calendar" in refused.stderr
    assert imported.returncode == 0, imported.stderr
    assert "2026-06-15" in {item["date"] for item in json.loads(imported.stdout)["dates"]}
    assert bad.returncode != 0 and "Not an iCalendar (ICS) file" in bad.stderr
