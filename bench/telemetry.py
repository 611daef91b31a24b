"""The cost per run of the telemetry calls on a run's path (jobs.telemetry), traces off and on.

In one process, without I/O: the calls the scheduler, publishing and the worker make for one run
(dispatch span, publish span and header, the worker's attempt span and its attributes, the log
context), repeated --runs times; traces on export to an exporter that drops
the spans (the SDK's batching and OTLP encoding, in a background thread, come on top, and the
network's cost is the collector's). Baseline in the same invocation: the same loop with nothing in it.

    .venv/bin/python bench/telemetry.py --runs 20000
"""

import time
from datetime import UTC, datetime
from types import SimpleNamespace

import benchenv

benchenv.setup()

from jobs.execution.publishing import Message  # noqa: E402
from jobs.telemetry import logs, tracing  # noqa: E402

JOB = SimpleNamespace(name="nightly-report", kind="callable", queue="jobs", pk=1)
SLOT = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
REQUEST = SimpleNamespace(traceparent=None, headers={})


ROWS = [(JOB, SLOT, "queued", "", None)]
MESSAGES = [Message(1, 1, "jobs", 30.0, None)]


def one_run(run_id):
    traceparents, spans = tracing.dispatching(ROWS, "schedule")
    tracing.dispatched(spans, [run_id])
    messages, spans = tracing.publishing(MESSAGES, {1: traceparents[0] if traceparents else ""})
    tracing.published(spans)
    REQUEST.traceparent = messages[0].headers and messages[0].headers["traceparent"]
    with logs.about_run(run_id, 1), tracing.attempt(REQUEST, run_id, 1):
        logs.name_job(JOB.name)
        tracing.annotate(tracing.run_attributes(job=JOB, slot=SLOT))
        tracing.inject({})
        tracing.annotate({"jobs.run.outcome": "succeeded"})


def nothing(run_id):
    pass


def per_run_us(body, runs):
    started = time.perf_counter()
    for run_id in range(runs):
        body(run_id)
    return (time.perf_counter() - started) / runs * 1e6


class Dropping:
    """A span exporter that drops what it is given."""

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30000):
        return True


def main():
    args = benchenv.arguments(__doc__, runs=20000)
    rows = []
    for _ in range(3):  # the best of three, each measure in turn
        baseline = per_run_us(nothing, args.runs)
        off = per_run_us(one_run, args.runs)
        tracing.start(exporter=Dropping())
        on = per_run_us(one_run, args.runs)
        tracing.stop()
        rows.append((baseline, off, on))
    baseline, off, on = (min(column) for column in zip(*rows, strict=True))
    print(f"{'measure (per run)':<46} {'µs':>8}")
    print(f"{'baseline: an empty loop':<46} {baseline:8.2f}")
    print(f"{'telemetry calls, traces off':<46} {off - baseline:8.2f}")
    print(f"{'telemetry calls, traces on (3 spans)':<46} {on - baseline:8.2f}")


if __name__ == "__main__":
    main()
