"""A function job that prints, returns or raises megabytes, through a real worker: the run and its
attempt store each at most its cap (JOBS_OUTPUT_MAX_BYTES for the output and the result's JSON,
JOBS_ERROR_MAX_BYTES for the error and the traceback), measured in the database's rows."""

from django.conf import settings
from django.db import connection

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus

from .conftest import wait_for

MB = 1024 * 1024
ERROR_CAP = 8 * 1024  # JOBS_ERROR_MAX_BYTES's default


def finished(job):
    run = lifecycle.create_run(job)
    wait_for(lambda: JobRun.objects.get(pk=run.pk).status in (RunStatus.SUCCEEDED, RunStatus.FAILED), timeout=60,
             message="the run to finish")
    run.refresh_from_db()
    return run


def stored_sizes(run):
    """Bytes of the run's output, result (as JSON text) and error, and of its attempt's error and
    traceback, as PostgreSQL holds them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT octet_length(r.output), coalesce(octet_length(r.result::text), 0), octet_length(r.error),"
                       " octet_length(a.error), octet_length(a.traceback) FROM jobs_jobrun r"
                       " JOIN jobs_jobattempt a ON a.run_id = r.id WHERE r.id = %s", [run.pk])
        return cursor.fetchone()


def test_a_function_printing_and_returning_megabytes_stores_them_capped(processes):
    job = save_job(Job(name="flood", kind="callable", target="test.flood",
                       kwargs={"print_bytes": 3 * MB, "result_bytes": 5 * MB}), {"type": "manual"})
    processes.worker(concurrency=1)

    run = finished(job)

    assert run.status == RunStatus.SUCCEEDED
    output, result, *_ = stored_sizes(run)
    assert output <= settings.JOBS_OUTPUT_MAX_BYTES and result <= settings.JOBS_OUTPUT_MAX_BYTES
    assert run.output_bytes == 3 * MB
    assert run.output.startswith("[") and f"earlier bytes of {3 * MB} not kept" in run.output
    assert run.output.endswith("pppp")
    assert run.result["bytes"] == 5 * MB + len('{"blob": ""}')
    assert "more than JOBS_OUTPUT_MAX_BYTES" in run.result["result_not_kept"]
    assert run.result["preview"].startswith('{"blob": "rrrr')


def test_a_function_failing_with_a_megabyte_error_stores_it_capped(processes):
    job = save_job(Job(name="flood", kind="callable", target="test.flood", kwargs={"error_bytes": 2 * MB}),
                   {"type": "manual"})
    processes.worker(concurrency=1)

    run = finished(job)

    assert run.status == RunStatus.FAILED
    _, _, run_error, attempt_error, traceback = stored_sizes(run)
    assert max(run_error, attempt_error, traceback) <= ERROR_CAP
    assert run.error.startswith("RuntimeError: eeee") and run.error.endswith("bytes in all; the rest not kept]")
    assert run.attempts.get().traceback.rstrip().endswith("eeee")


def test_a_function_printing_returning_and_raising_nul_characters_stores_its_run(processes):
    """PostgreSQL's text and jsonb hold no NUL character: each is stored as U+FFFD instead."""
    printed = save_job(Job(name="nul", kind="callable", target="test.nul"), {"type": "manual"})
    raised = save_job(Job(name="nul-error", kind="callable", target="test.nul", kwargs={"fail": True}),
                      {"type": "manual"})
    processes.worker(concurrency=1)

    ok, failed = finished(printed), finished(raised)

    assert (ok.status, ok.output, ok.result) == (RunStatus.SUCCEEDED, "a\ufffdb\n", {"text": "a\ufffdb"})
    assert (failed.status, failed.error) == (RunStatus.FAILED, "RuntimeError: a\ufffdb")
    assert failed.output == "a\ufffdb\n" and failed.attempts.get().traceback.rstrip().endswith("a\ufffdb")
