"""GET /api/jobs/<id>/why/?at=: what became of a job's slot, in one sentence."""

from io import StringIO

import time_machine
from django.core.management import call_command

from .test_slot_report import LATER, history  # noqa: F401 (fixtures)


def test_it_explains_a_slot_skipped_while_the_job_was_paused(people, history):  # noqa: F811
    client = people.client(people.teammate)
    with time_machine.travel(LATER, tick=False):
        skipped = client.get(f"/api/jobs/{history.pk}/why/", {"at": "2026-11-20T03:00:00Z"})
        ran = client.get(f"/api/jobs/{history.pk}/why/", {"at": "2026-11-20T01:00"})
    assert skipped.status_code == 200
    assert skipped.json() == {
        "job": "hourly", "at": "2026-11-20T03:00:00Z",
        "explanation": "Skipped: the slot at 2026-11-20 03:00:00 UTC was not run: job paused by owner (API) at "
                       "2026-11-20 02:30:00 UTC.",
    }
    assert ran.json()["explanation"].startswith("It ran: run #")


def test_it_needs_a_moment_and_hides_other_peoples_jobs(people, history):  # noqa: F811
    client = people.client(people.owner)
    missing = client.get(f"/api/jobs/{history.pk}/why/")
    assert missing.status_code == 400 and missing.json() == {"at": ["This parameter is required."]}
    bad = client.get(f"/api/jobs/{history.pk}/why/", {"at": "yesterday"})
    assert bad.status_code == 400 and "at" in bad.json()
    hidden = people.client(people.outsider).get(f"/api/jobs/{history.pk}/why/", {"at": "2026-11-20T03:00"})
    assert hidden.status_code == 404


def test_a_slot_skipped_while_paused_on_the_command_line_does_not_name_the_os_user(people, history):  # noqa: F811
    with time_machine.travel("2026-11-20T05:30:00Z", tick=False):
        call_command("jobs", "pause", history.name, stdout=StringIO())
    with time_machine.travel(LATER, tick=False):
        answer = people.client(people.teammate).get(f"/api/jobs/{history.pk}/why/", {"at": "2026-11-20T06:00Z"})
    assert answer.json()["explanation"] == ("Skipped: the slot at 2026-11-20 06:00:00 UTC was not run: job paused by "
                                            "an operator (command line) at 2026-11-20 05:30:00 UTC.")
