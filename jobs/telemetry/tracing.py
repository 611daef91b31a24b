"""Traces (OpenTelemetry): each run is one trace, from its dispatch to the notifications it caused.

Off unless the standard ``OTEL_*`` variables ask for traces (``settings.JOBS_TRACING``); then
``start`` sets up the SDK and the Celery and Django instrumentations. Off, nothing of
OpenTelemetry is imported and every call here returns at once (``tests/test_tracing.py`` checks
``sys.modules`` in a fresh process).

A run's trace:

- ``dispatch`` (its root): the run made, by the scheduler's tick, run now, a backfill or a workflow
  step (``jobs.lifecycle.create_runs``). Its context, a W3C ``traceparent``, is stored on the run
  (``JobRun.traceparent``): whoever publishes, claims or notifies later, in whatever process, finds
  the trace there;
- ``publish jobs.execute_run`` for each attempt's message, a child of the run's root; its context
  travels in the message's headers (``traceparent``);
- ``run/jobs.execute_run``: the worker's attempt, from the message to the recorded outcome, one
  span (the Celery instrumentation's, from the message's headers; ``attempt``): the claim, the
  execution and the outcome are in it, not spans of their own. An HTTP job sends its
  ``traceparent`` to the service it calls;
- ``notify``: the deliveries an outcome planned (in the outcome's transaction, in the attempt's
  span), and ``notification.send`` for each delivery sent, a child of the run's root whichever
  process sends it, when (a retry after a backoff, a digest).

Attributes (``jobs.*``): the job's name, kind and queue, the run id, the attempt, the slot and, on
the attempt's span, its outcome.
"""

import contextlib
import os

ATTRIBUTE_PREFIX = "jobs."
_tracer = None  # set by start(): traces are on
_NOOP = contextlib.nullcontext()


def enabled():
    return _tracer is not None


def start(service_name="scheduler", exporter=None):
    """Set up the SDK (the exporter from the OTEL_* variables, or ``exporter`` given, as tests do,
    sent span by span) and instrument Celery and Django. Idempotent."""
    global _tracer
    if _tracer is not None:
        return
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name})
    provider = TracerProvider(resource=resource)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider.add_span_processor(BatchSpanProcessor(_exporter_from_environment()))
        trace.set_tracer_provider(provider)  # the process's, for any other instrumented library
    CeleryInstrumentor().instrument(tracer_provider=provider)
    DjangoInstrumentor().instrument(tracer_provider=provider)
    _tracer = provider.get_tracer("jobs")


def stop():
    """Turn traces off again (tests that started them in their own process)."""
    global _tracer
    if _tracer is None:
        return
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    CeleryInstrumentor().uninstrument()
    DjangoInstrumentor().uninstrument()
    _tracer = None


def _exporter_from_environment():
    """OTEL_TRACES_EXPORTER: ``otlp`` (the default; OTLP over HTTP/protobuf, configured by the
    standard OTEL_EXPORTER_OTLP_* variables) or ``console``."""
    name = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: this service exports traces by 'otlp' or 'console'")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def flush(timeout_millis=5000):
    if _tracer is not None:
        from opentelemetry import trace

        trace.get_tracer_provider().force_flush(timeout_millis)


def run_attributes(run_id=None, attempt=None, job=None, slot=None, queue=None):
    """A run's attributes on a span (nothing when off: nobody reads them)."""
    if _tracer is None:
        return {}
    attributes = {}
    if run_id is not None:
        attributes["jobs.run.id"] = int(run_id)
    if attempt is not None:
        attributes["jobs.run.attempt"] = int(attempt)
    if slot is not None:
        attributes["jobs.run.slot"] = slot.isoformat()
    if job is not None:
        attributes["jobs.job.name"] = job.name
        attributes["jobs.job.kind"] = job.kind
        queue = queue or job.queue
    if queue:
        attributes["jobs.job.queue"] = queue
    return attributes


def _context(traceparent):
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent}) if traceparent else None


def _traceparent(span):
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent", "")


# --- dispatch: the root of a run's trace

def dispatching(rows, trigger):
    """One ``dispatch`` span per (job, slot, ...) row about to become a run, each the root of a new
    trace (linked to the current span, a request's or a tick's, when there is one). Returns their
    ``traceparent``s, to store on the runs, and the spans; (None, None) when off."""
    if _tracer is None:
        return None, None
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    current = trace.get_current_span().get_span_context()
    links = [trace.Link(current)] if current.is_valid else None
    spans = []
    for job, slot, status, reason, _start_at in rows:
        attributes = {**run_attributes(job=job, slot=slot, attempt=1), "jobs.run.trigger": str(trigger),
                      "jobs.run.created_status": str(status)}
        if reason:
            attributes["jobs.run.reason"] = reason
        spans.append(_tracer.start_span("dispatch", context=otel_context.Context(), links=links,
                                        attributes=attributes))
    return [_traceparent(span) for span in spans], spans


def dispatched(spans, run_ids):
    """End the dispatch spans of the runs made (``run_ids``, in the rows' order, None where the slot
    had a run already: that span is dropped unsent)."""
    if not spans:
        return
    for span, run_id in zip(spans, run_ids, strict=True):
        if run_id is not None:
            span.set_attribute("jobs.run.id", int(run_id))
            span.end()


# --- publish: one span per message, its context in the message's headers

def publishing(messages, traceparents):
    """(messages with a ``traceparent`` header, their spans) for ``messages`` of runs whose stored
    ``traceparents`` ({run id: traceparent}) are given; (messages, None) when off."""
    if _tracer is None:
        return messages, None
    from opentelemetry import trace

    traced, spans = [], []
    for message in messages:
        span = _tracer.start_span(
            "publish jobs.execute_run", context=_context(traceparents.get(message.run_id)),
            kind=trace.SpanKind.PRODUCER,
            attributes={**run_attributes(message.run_id, message.attempt, queue=message.queue),
                        "messaging.system": "celery", "messaging.destination.name": message.queue,
                        "messaging.operation.type": "send"})
        spans.append(span)
        traced.append(message._replace(headers={**(message.headers or {}), "traceparent": _traceparent(span)}))
    return traced, spans


def published(spans, error=None):
    for span in spans or ():
        if error is not None:
            span.record_exception(error)
            from opentelemetry.trace import StatusCode

            span.set_status(StatusCode.ERROR, str(error))
        span.end()


# --- the worker, the outcome, the notifications: spans in the current context

def attempt(request, run_id, attempt):
    """The worker's attempt as one span, from its message to its recorded outcome: the Celery
    instrumentation's (``run/jobs.execute_run``, opened from the message's ``traceparent`` header,
    a child of its ``publish`` span), given the run's id and attempt. Opened here when there is
    none in the run's trace (a message without the header, an eager call). Everything in the
    attempt is in it: the job's own spans, an HTTP job's request (``inject``), the notifications
    its outcome plans. A do-nothing context when off."""
    if _tracer is None:
        return _NOOP
    return _attempt(request, run_id, attempt)


@contextlib.contextmanager
def _attempt(request, run_id, attempt):
    from opentelemetry import trace

    traceparent = getattr(request, "traceparent", None) or (getattr(request, "headers", None) or {}).get("traceparent")
    parent = _context(traceparent)
    current = trace.get_current_span()
    if current.get_span_context().is_valid and (
            parent is None or current.get_span_context().trace_id == trace.get_current_span(parent)
            .get_span_context().trace_id):
        current.set_attributes(run_attributes(run_id, attempt))
        yield
        return
    with _tracer.start_as_current_span("run/jobs.execute_run", context=parent,
                                       kind=trace.SpanKind.CONSUMER, attributes=run_attributes(run_id, attempt)):
        yield


def step(name, attributes=None, traceparent=None):
    """A span for one step of a run, a child of the current span; of the run's root when its
    ``traceparent`` is given (a step in a process the run's context did not reach), linked then to
    the current span. A do-nothing context when off."""
    if _tracer is None:
        return _NOOP
    links = None
    context = None
    if traceparent:
        from opentelemetry import trace

        context = _context(traceparent)
        current = trace.get_current_span().get_span_context()
        links = [trace.Link(current)] if current.is_valid else None
    return _tracer.start_as_current_span(name, context=context, links=links, attributes=attributes or {})


def annotate(attributes):
    """Add ``attributes`` to the current span (in the worker, the attempt's)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(attributes)


def inject(headers):
    """Put the current span's ``traceparent`` into ``headers`` (an HTTP job's request)."""
    if _tracer is None:
        return headers
    from opentelemetry import propagate

    propagate.inject(headers)
    return headers
