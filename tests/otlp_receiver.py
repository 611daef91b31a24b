"""A tiny OTLP/HTTP traces receiver for the tests: POST /v1/traces with an ExportTraceServiceRequest
(protobuf) is decoded into spans; any other POST (an HTTP job's call, a webhook) is recorded with
its headers."""

import gzip
import threading
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from .local_http import LocalHTTPServer, QuietHandler


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    service: str
    attributes: dict = field(default_factory=dict)


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def decode(body):
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(ReceivedSpan(
                    name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(), service=resource.get("service.name", ""),
                    attributes={a.key: _value(a.value) for a in span.attributes}))
    return spans


class OTLPReceiver(LocalHTTPServer):
    def __init__(self):
        self.spans, self.requests = [], []
        self.lock = threading.Lock()
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver.lock:
                    if self.path == "/v1/traces":
                        receiver.spans.extend(decode(body))
                        answer, content_type = ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf"
                    else:
                        receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                        answer, content_type = b"ok", "text/plain"
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        super().__init__(Handler)

    def trace(self, trace_id):
        with self.lock:
            return [span for span in self.spans if span.trace_id == trace_id]
