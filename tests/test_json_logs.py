"""LOG_FORMAT=json: every line a process writes is one JSON object, and those about a run carry its
run_id, job and attempt (jobs.telemetry.logs)."""

import json
import logging

import pytest

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus
from jobs.telemetry import logs

from .conftest import wait_for


def json_lines(path):
    """The records of a log, up to its last complete line (the process may be writing the next)."""
    text = path.read_text()
    lines = [line for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            pytest.fail(f"{path.name}: a line that is not JSON: {line!r}")
        assert isinstance(record, dict) and record.get("message") is not None, line
    return [json.loads(line) for line in lines]


def test_the_filter_puts_the_run_on_records_made_about_it_and_nothing_on_the_others():
    made = []

    class Keep(logging.Handler):
        def emit(self, record):
            made.append(record)

    logger = logging.getLogger("tests.json_logs")
    handler = Keep()
    handler.addFilter(logs.RunFilter())
    logger.addHandler(handler)
    try:
        logger.warning("before")
        with logs.about_run(41, 2):
            logs.name_job("nightly")
            logger.warning("during")
        logger.warning("after")
    finally:
        logger.removeHandler(handler)
    assert [(r.getMessage(), getattr(r, "run_id", None), getattr(r, "job", None), getattr(r, "attempt", None))
            for r in made] == [("before", None, None, None), ("during", 41, "nightly", 2), ("after", None, None, None)]


@pytest.mark.postgres("real processes")
def test_a_worker_and_beat_write_json_lines_and_the_runs_lines_carry_its_id(processes):
    failing = save_job(Job(name="json-fails", kind="callable", target="builtin.fail"), {"type": "manual"})
    every = save_job(Job(name="json-every-2s", kind="callable", target="builtin.noop"),
                     {"type": "interval", "every_seconds": 2})
    worker = processes.worker(LOG_FORMAT="json")
    beat = processes.beat(LOG_FORMAT="json")

    run = lifecycle.create_run(failing)
    wait_for(lambda: run.refresh_from_db() or run.is_terminal, timeout=40, message="the failing run to end")
    wait_for(lambda: every.runs.filter(status=RunStatus.SUCCEEDED).exists(), timeout=40,
             message="a scheduled run to succeed")

    # Celery logs the task's failure after the task recorded it, so the line may come after the
    # run's end in the database (and after the scheduled run's): wait for it.
    def failure_logged():
        records = json_lines(worker.log_path)
        about_run = [r for r in records if r.get("run_id") == run.pk]
        return any("failing on purpose" in r["message"] for r in about_run) and (records, about_run)

    worker_records, about_run = wait_for(failure_logged, timeout=30,
                                         message="the worker's line about the failing run, with its id")
    assert all(r["job"] == "json-fails" and r["attempt"] == 1 for r in about_run if "job" in r)
    assert any("failing on purpose" in r["message"] and r.get("job") == "json-fails" for r in about_run)
    assert not [r for r in worker_records if "run_id" in r and r["run_id"] not in set(
        every.runs.values_list("pk", flat=True)) | {run.pk}]
    assert any(r["logger"] == "celery.apps.worker" for r in worker_records)  # Celery's own lines too
    beat_records = json_lines(beat.log_path)
    assert any(r["logger"].startswith(("celery.beat", "jobs.")) for r in beat_records)
