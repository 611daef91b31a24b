"""The scheduler through Berlin's transition nights under the policies ``dst_skipped=skip`` and
``dst_repeated=both`` (and ``second``), on a clock the test controls: dispatched on time, caught up
after a downtime over the night, backfilled; the slot report, "why", the schedule preview and the
job page say the same, and name the policy where it moved or skipped a slot.

The expected slots come from the test's own oracle (tests/dst_oracle.py), not from the service. The
scheduler's tick is ``dispatch.dispatch_due`` at the test's moment, as in tests/test_dst_nights.py.
"""

from collections import Counter
from datetime import timedelta

import pytest
import time_machine
from django.test import Client

from jobs.definitions.jobs import save_job
from jobs.models import CatchupPolicy, Job, RunStatus, RunTrigger

from . import dst_oracle
from .api_personas import make_personas
from .test_dst_nights import AROUND, BERLIN, NIGHTS_2026, NIGHTS_2027, QUARTERS_OF_TWO, TICK, local, runs_per_slot, tick

# (dst_skipped, dst_repeated) -> the slots of each night in Berlin's words, which the oracle must agree with.
POLICIES = {
    ("skip", "both"): {"spring": [],
                       "autumn": ["02:00 CEST", "02:15 CEST", "02:30 CEST", "02:45 CEST",
                                  "02:00 CET", "02:15 CET", "02:30 CET", "02:45 CET"]},
    ("skip", "second"): {"spring": [], "autumn": ["02:00 CET", "02:15 CET", "02:30 CET", "02:45 CET"]},
    ("shift", "both"): {"spring": ["03:00 CEST", "03:15 CEST", "03:30 CEST", "03:45 CEST"],
                        "autumn": ["02:00 CEST", "02:15 CEST", "02:30 CEST", "02:45 CEST",
                                   "02:00 CET", "02:15 CET", "02:30 CET", "02:45 CET"]},
}


def expected_slots(change, policy, night):
    slots = dst_oracle.policy_slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change - AROUND, change + AROUND, *policy)
    assert local(slots) == POLICIES[policy][night]  # the oracle, checked against Berlin's words
    return slots


def night_job(name, change, policy, **fields):
    with time_machine.travel(change - AROUND, tick=False):
        return save_job(Job(name=name, kind="callable", target="builtin.noop", dst_skipped=policy[0],
                            dst_repeated=policy[1], **fields),
                        {"type": "cron", "cron": QUARTERS_OF_TWO, "timezone": "Europe/Berlin"})


@pytest.mark.django_db
@pytest.mark.parametrize("policy", list(POLICIES))
def test_the_scheduler_ticking_through_both_nights_runs_the_policys_slots_once_each(
        policy, redis_client, django_capture_on_commit_callbacks):
    for night, change in NIGHTS_2027.items():
        job = night_job(f"ticked-{night}", change, policy)
        now = change - AROUND + timedelta(seconds=3)
        while now < change + AROUND:
            tick(now, django_capture_on_commit_callbacks)
            now += TICK

        expected = expected_slots(change, policy, night)
        assert runs_per_slot(job) == Counter(expected), (night, local(expected))
        job.refresh_from_db()
        following = dst_oracle.policy_slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change + AROUND,
                                                    change + timedelta(days=2), *policy)
        assert job.next_run_at == following[0]


@pytest.mark.django_db
@pytest.mark.parametrize("policy", [("skip", "both")])
def test_a_downtime_over_the_night_catches_up_or_skips_the_policys_slots_once_each(
        policy, redis_client, django_capture_on_commit_callbacks):
    for night, change in NIGHTS_2027.items():
        caught_up = night_job(f"all-{night}", change, policy, catchup_policy=CatchupPolicy.ALL, catchup_max=10)
        skipped = night_job(f"none-{night}", change, policy, catchup_policy=CatchupPolicy.NONE)
        tick(change - AROUND + timedelta(seconds=3), django_capture_on_commit_callbacks)
        tick(change + AROUND, django_capture_on_commit_callbacks)

        expected = Counter(expected_slots(change, policy, night))
        assert runs_per_slot(caught_up) == expected, night
        assert runs_per_slot(skipped) == expected, night
        if expected:
            assert set(skipped.runs.values_list("status", "reason")) == {
                (RunStatus.SKIPPED, "missed: catch-up policy 'none'")}


@pytest.mark.django_db
@pytest.mark.parametrize("policy", [("skip", "both"), ("shift", "both")])
def test_a_backfill_runs_the_policys_slots_and_the_report_and_why_name_the_policy(policy, redis_client):
    people = make_personas()
    client = people.client(people.owner)
    browser = Client()
    browser.force_login(people.owner)
    for night, change in NIGHTS_2026.items():
        job = night_job(f"backfilled-{night}", change, policy, owner=people.owner, group=people.team)
        body = {"start": (change - AROUND).isoformat(), "end": (change + AROUND).isoformat()}

        response = client.post(f"/api/jobs/{job.pk}/backfill/", body, format="json")

        expected = dst_oracle.policy_slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change - AROUND,
                                                   change + AROUND, *policy)
        assert len(expected) == {"spring": 0 if policy[0] == "skip" else 4, "autumn": 8}[night]
        assert response.status_code in (200, 202), response.json()
        assert runs_per_slot(job) == Counter(expected), night
        runs = dict(job.runs.values_list("scheduled_for", "pk"))
        assert set(job.runs.values_list("trigger", flat=True)) <= {RunTrigger.BACKFILL}
        report = client.get(f"/api/jobs/{job.pk}/slots/", body).json()
        shown = [(slot["scheduled_for"], slot["outcome"]) for slot in report["slots"]]
        if night == "spring" and policy[0] == "skip":
            # Each of the four wall-clock slots the gap skipped is reported skipped, naming the policy,
            # at the instant the gap would have shifted it to (that is how one asks "why" about it).
            shifted = dst_oracle.policy_slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change - AROUND,
                                                      change + AROUND, "shift", "first")
            assert shown == [(at.isoformat().replace("+00:00", "Z"), "skipped") for at in shifted]
            for slot, wall in zip(report["slots"], ["02:00", "02:15", "02:30", "02:45"], strict=True):
                assert slot["reason"] == (f"DST gap: {wall} on 2026-03-29 does not exist in Europe/Berlin "
                                          "(policy dst_skipped=skip)")
            for at in shifted:
                why = client.get(f"/api/jobs/{job.pk}/why/", {"at": at.isoformat()}).json()["explanation"]
                assert why.startswith(f"Skipped: the slot at {at:%Y-%m-%d %H:%M:%S} UTC was not run: DST gap: "), why
                assert why.endswith("(policy dst_skipped=skip).")
            continue
        assert shown == [(at.isoformat().replace("+00:00", "Z"), "ran") for at in expected]
        for slot, at in zip(report["slots"], expected, strict=True):
            wall = at.astimezone(BERLIN)
            if night == "spring":  # shifted by the gap
                assert slot["reason"] == (f"moved from {wall - timedelta(hours=1):%H:%M} to {wall:%H:%M} by the DST "
                                          "gap (policy dst_skipped=shift)")
            else:
                which = "first" if wall.dst() else "second"
                assert slot["reason"] == (f"{wall:%H:%M} comes twice on 2026-10-25: this is its {which} occurrence, "
                                          f"{wall:%H:%M %Z} (policy dst_repeated=both)")
            why = client.get(f"/api/jobs/{job.pk}/why/", {"at": at.isoformat()}).json()["explanation"]
            assert why == (f"It ran: run #{runs[at]} (backfill) for {at:%Y-%m-%d %H:%M:%S} UTC is queued "
                           f"({slot['reason']}).")
        page = browser.get(f"/jobs/{job.pk}/slots/", {"from": f"{(change - AROUND).astimezone(BERLIN):%Y-%m-%dT%H:%M}",
                                                      "to": f"{(change + AROUND).astimezone(BERLIN):%Y-%m-%dT%H:%M}"})
        rows = page.content.decode()
        assert rows.count('class="slot-ran"') == len(expected), night
        assert rows.count("(policy dst_") == len(expected), night


@pytest.mark.django_db
@pytest.mark.parametrize("policy", [("skip", "both"), ("skip", "second")])
def test_the_schedule_preview_the_job_page_and_its_dst_preview_show_the_policys_slots(policy, redis_client):
    people = make_personas()
    browser = Client()
    for night, change in NIGHTS_2027.items():
        job = night_job(f"previewed-{night}", change, policy, owner=people.owner, group=people.team)
        first_ten = dst_oracle.policy_slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change - AROUND,
                                                    change + timedelta(days=4), *policy)[:10]
        shown = [slot.astimezone(BERLIN).strftime("%a %Y-%m-%d %H:%M:%S %Z") for slot in first_ten]

        with time_machine.travel(change - AROUND, tick=False):
            browser.force_login(people.owner)
            preview = browser.get("/jobs/schedule-preview/", {
                "schedule_type": "cron", "cron": QUARTERS_OF_TWO, "timezone": "Europe/Berlin",
                "dst_skipped": policy[0], "dst_repeated": policy[1]}).json()
            page = browser.get(f"/jobs/{job.pk}/").content.decode()

        assert preview["slots"] == shown, night
        assert all(f"<li>{text} " in page for text in shown), night
        if night == "spring":
            assert '<li class="dst-skipped">02:15 on 28 March is skipped (it does not exist; policy dst_skipped=skip)</li>' in page
        elif policy[1] == "both":
            assert '<li class="dst-both">02:15 on 31 October runs twice: 02:15 CEST and 02:15 CET (policy dst_repeated=both)</li>' in page
        else:
            assert ('<li class="dst-second">02:15 on 31 October runs once, at 02:15 CET (its second occurrence; '
                    'policy dst_repeated=second)</li>') in page
