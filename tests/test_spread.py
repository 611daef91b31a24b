"""A job's spread and the H of its cron expression: the same offset and the same numbers in every
process and on every host, within their ranges, and every consumer of slots (dispatch, the preview,
the slot report's ranges) agreeing on the moved slot, which is the run's ``scheduled_for``."""

import itertools
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from croniter import croniter
from django_celery_beat.models import CrontabSchedule

from jobs.definitions.jobs import save_job
from jobs.models import Job
from jobs.scheduling import dispatch
from jobs.timing import spread

from .api_personas import make_personas

NAMES = [f"job-{i}" for i in range(500)] + ["nightly-export", "Ünïcode ✓", ""]
EXPRESSIONS = ["H * * * *", "H(0-29) 2 * * *", "H/15 * * * *", "H(10-40)/7 H(1-5) * * *", "H H H H H", "5,H 1 * * *"]
NOW = datetime(2026, 6, 10, 9, 7, 13, tzinfo=UTC)

IN_A_FRESH_PROCESS = """
import json, sys
from jobs.timing import spread
names, expressions = json.loads(sys.stdin.read())
print(json.dumps({"offsets": [spread.offset_seconds(n, 3600) for n in names],
                  "resolved": [[spread.resolve(e, n) for e in expressions] for n in names]}))
"""


def test_offsets_and_H_are_the_same_in_a_fresh_process_with_another_hash_seed():
    here = {"offsets": [spread.offset_seconds(n, 3600) for n in NAMES],
            "resolved": [[spread.resolve(e, n) for e in EXPRESSIONS] for n in NAMES]}
    for seed in ("1", "2"):  # str hashes differ between these processes: the offsets must not
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", IN_A_FRESH_PROCESS], input=json.dumps([NAMES, EXPRESSIONS]),
                              capture_output=True, text=True, env=env, timeout=60, check=True)
        assert json.loads(done.stdout) == here


@pytest.mark.parametrize("seconds", [1, 7, 60, 3600, spread.MAX_SPREAD_SECONDS])
def test_offsets_lie_within_the_spread_and_use_it(seconds):
    offsets = [spread.offset_seconds(name, seconds) for name in NAMES]
    assert all(0 <= offset < seconds for offset in offsets)
    assert len(set(offsets)) >= min(seconds, len(NAMES)) // 3  # spread out, not a few values
    assert spread.offset_seconds("nightly-export", 0) == 0


def _matches(expression, field, value):
    """Whether cron field ``field`` of ``expression`` (a plain one) allows ``value``."""
    return value in croniter(expression).expanded[field]


def test_H_resolves_within_the_given_range_to_a_valid_expression():
    for name in NAMES:
        resolved = {e: spread.resolve(e, name) for e in EXPRESSIONS}
        assert all(croniter.is_valid(r) and "H" not in r for r in resolved.values())
        minute = int(resolved["H * * * *"].split()[0])
        assert 0 <= minute <= 59
        assert 0 <= int(resolved["H(0-29) 2 * * *"].split()[0]) <= 29
        first, step = resolved["H/15 * * * *"].split()[0].split("/")
        assert step == "15" and first.endswith("-59") and 0 <= int(first.split("-")[0]) < 15
        minutes = croniter(resolved["H(10-40)/7 H(1-5) * * *"]).expanded[0]
        assert min(minutes) in range(10, 17) and max(minutes) <= 40 and all(b - a == 7 for a, b in itertools.pairwise(minutes))
        assert 1 <= int(resolved["H(10-40)/7 H(1-5) * * *"].split()[1]) <= 5
        day, month, weekday = (int(v) for v in resolved["H H H H H"].split()[2:])
        assert 1 <= day <= 28 and 1 <= month <= 12 and 0 <= weekday <= 6
        assert resolved["5,H 1 * * *"].startswith("5,")
    minutes = {int(spread.resolve("H * * * *", name).split()[0]) for name in NAMES}
    assert len(minutes) > 40  # the jobs land on many minutes, not one
    assert spread.resolve("*/5 * * * *", "x") == "*/5 * * * *"


@pytest.mark.parametrize("expression, named", [
    ("H(30-10) * * * *", "range"), ("H(0-60) * * * *", "range"), ("H/0 * * * *", "step"),
    ("H/61 * * * *", "step"), ("Hx * * * *", "H is written"), ("H(1-2 * * * *", "H is written"),
    ("* * H(0-31) * *", "range"), ("H * * *", "5 fields"), ("H; DROP TABLE jobs_job * * * *", "fields"),
])
def test_a_bad_H_is_refused_with_a_400_naming_the_rule(db, expression, named):
    people = make_personas()
    answer = people.client(people.owner).post("/api/jobs/", {
        "name": "hashed", "kind": "callable", "target": "builtin.noop",
        "schedule": {"type": "cron", "cron": expression, "timezone": "UTC"}}, format="json")
    assert answer.status_code == 400, answer.content
    assert named in json.dumps(answer.json()["schedule"]["cron"])
    assert not Job.objects.filter(name="hashed").exists()


@pytest.mark.django_db
def test_a_job_with_H_stores_its_numbers_for_beat_and_shows_both():
    people = make_personas()
    client = people.client(people.owner)
    with time_machine.travel(NOW, tick=False):
        answer = client.post("/api/jobs/", {
            "name": "hashed", "kind": "callable", "target": "builtin.noop",
            "schedule": {"type": "cron", "cron": "H H(2-4) * * *", "timezone": "Europe/Berlin"}}, format="json")
    assert answer.status_code == 201, answer.content
    expected = spread.resolve("H H(2-4) * * *", "hashed")
    assert answer.json()["schedule"] == {"type": "cron", "cron": "H H(2-4) * * *", "timezone": "Europe/Berlin",
                                         "resolved": expected}
    job = Job.objects.select_related("crontab").get(name="hashed")
    row = job.crontab
    assert f"{row.minute} {row.hour} {row.day_of_month} {row.month_of_year} {row.day_of_week}" == expected
    assert "H" not in str(row.schedule)  # stock beat reads the row as a celery crontab
    assert f"H H(2-4) * * * = {expected}" in job.describe_schedule()
    expected_next = croniter(expected, NOW.astimezone(job.crontab.timezone).replace(tzinfo=None)).get_next(datetime)
    assert job.next_run_at == expected_next.replace(tzinfo=job.crontab.timezone).astimezone(UTC)

    # What was read back is accepted back (the read-only "resolved" is ignored), and changes nothing.
    shown = client.get(f"/api/jobs/{job.pk}/").json()
    again = client.put(f"/api/jobs/{job.pk}/", {key: shown[key] for key in (
        "name", "kind", "target", "schedule")}, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["schedule"]["cron"] == "H H(2-4) * * *"

    # A new name hashes to new numbers: renaming the job moves it.
    renamed = client.patch(f"/api/jobs/{job.pk}/", {"name": "hashed-renamed"}, format="json")
    assert renamed.status_code == 200
    assert renamed.json()["schedule"]["resolved"] == spread.resolve("H H(2-4) * * *", "hashed-renamed")


@pytest.mark.django_db
def test_a_workflow_refuses_H_in_its_schedule():
    people = make_personas()
    answer = people.client(people.owner).post("/api/workflows/", {
        "name": "flow", "nodes": ["nightly-report"], "edges": [],
        "schedule": {"type": "cron", "cron": "H * * * *", "timezone": "UTC"}}, format="json")
    assert answer.status_code == 400
    assert "H is for jobs" in answer.content.decode(), answer.content
    assert CrontabSchedule.objects.filter(minute="H").count() == 0


def _cron_job(name, seconds, cron="0 * * * *", zone="UTC"):
    return save_job(Job(name=name, kind="callable", target="builtin.noop", spread=seconds),
                    {"type": "cron", "cron": cron, "timezone": zone})


@pytest.mark.django_db
def test_every_slot_moves_by_the_offset_and_the_run_is_scheduled_for_the_moved_slot():
    with time_machine.travel(NOW, tick=False):
        job = _cron_job("spread-hourly", 1800)
        plain = _cron_job("plain-hourly", 0)
    offset = timedelta(seconds=spread.offset_seconds("spread-hourly", 1800))
    hours = [h for h in (datetime(2026, 6, 10, h, tzinfo=UTC) for h in range(9, 17)) if h + offset > NOW][:6]
    assert job.upcoming_slots(6, after=NOW) == [h + offset for h in hours]
    assert plain.upcoming_slots(6, after=NOW) == [datetime(2026, 6, 10, h, tzinfo=UTC) for h in range(10, 16)]
    assert job.slots_between(hours[0], hours[-1] + timedelta(hours=1), 100) == [h + offset for h in hours]
    assert job.next_run_at == hours[0] + offset

    with time_machine.travel(hours[0] + offset + timedelta(seconds=1), tick=False):
        dispatch.dispatch_due(now=hours[0] + offset + timedelta(seconds=1))
    assert [run.scheduled_for for run in job.runs.all()] == [hours[0] + offset]
    job.refresh_from_db()
    assert job.next_run_at == hours[1] + offset


@pytest.mark.django_db
def test_changing_the_spread_moves_the_next_slot_within_the_same_hour():
    people = make_personas()
    client = people.client(people.owner)
    with time_machine.travel(NOW, tick=False):
        job = save_job(Job(name="movable", kind="callable", target="builtin.noop", owner=people.owner),
                       {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
        assert job.next_run_at == datetime(2026, 6, 10, 10, tzinfo=UTC)
        answer = client.patch(f"/api/jobs/{job.pk}/", {"spread": 3000}, format="json")
        assert answer.status_code == 200, answer.content
        offset = timedelta(seconds=spread.offset_seconds("movable", 3000))
        job.refresh_from_db()
        assert job.next_run_at == datetime(2026, 6, 10, 10, tzinfo=UTC) + offset
        for bad in (-1, spread.MAX_SPREAD_SECONDS + 1, "lots", 10**12):
            refused = client.patch(f"/api/jobs/{job.pk}/", {"spread": bad}, format="json")
            assert refused.status_code == 400 and "spread" in refused.json()
        job.refresh_from_db()
        assert job.spread == 3000


@pytest.mark.django_db
def test_interval_and_one_time_jobs_move_by_their_offset_too():
    with time_machine.travel(NOW, tick=False):
        every = save_job(Job(name="every-minute", kind="callable", target="builtin.noop", spread=45),
                         {"type": "interval", "every_seconds": 60})
        once = save_job(Job(name="once", kind="callable", target="builtin.noop", spread=600),
                        {"type": "once", "run_at": "2026-06-11T00:00:00Z"})
    first = NOW + timedelta(seconds=60 + spread.offset_seconds("every-minute", 45))
    assert every.next_run_at == first
    assert every.upcoming_slots(3, after=first) == [first + timedelta(seconds=60 * k) for k in (1, 2, 3)]
    moment = datetime(2026, 6, 11, tzinfo=UTC) + timedelta(seconds=spread.offset_seconds("once", 600))
    assert once.next_run_at == moment
    assert once.slot_after(NOW) == moment and once.slot_after(moment) is None


def test_jitter_and_spread_are_different_settings():
    fields = {f.name: f for f in Job._meta.get_fields()}
    assert "hash of the job's name" in str(fields["spread"].help_text)
    assert "at random" in str(fields["jitter_seconds"].help_text)


@pytest.mark.django_db
def test_the_stored_offset_follows_the_name_and_spread_through_every_save():
    from jobs.definitions.jobs import save_jobs

    people = make_personas()
    client = people.client(people.owner)

    def stored_matches():
        rows = Job.objects.values_list("name", "spread", "spread_offset_seconds")
        return all(offset == spread.offset_seconds(name, seconds) for name, seconds, offset in rows)

    created = client.post("/api/jobs/", {"name": "stored", "kind": "callable", "target": "builtin.noop",
                                         "spread": 3600, "schedule": {"type": "interval", "every_seconds": 60}},
                          format="json").json()
    client.patch(f"/api/jobs/{created['id']}/", {"name": "stored-renamed"}, format="json")
    client.patch(f"/api/jobs/{created['id']}/", {"spread": 777}, format="json")
    assert save_jobs([(Job(name=f"bulk-{i}", kind="callable", target="builtin.noop", spread=900),
                       {"type": "cron", "cron": "H * * * *", "timezone": "UTC"}) for i in range(20)]) == {}
    assert Job.objects.filter(spread_offset_seconds__gt=0).count() >= 15
    assert stored_matches()
