"""A local HTTP server that records every request it gets, for the security tests: an attempt
that was refused must leave it untouched. No tests here."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Target:
    """Listens on ``host`` (any 127.x.y.z address is this machine). ``routes`` maps a path to
    (status, headers, body) or to a callable writing the answer itself."""

    def __init__(self, host="127.0.0.1", routes=None):
        self.hits = []
        self.routes = routes or {}
        target = self

        class Handler(BaseHTTPRequestHandler):
            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                target.hits.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                    "body": self.rfile.read(length)})
                route = target.routes.get(self.path.split("?")[0], (200, {}, b"inside: the secret page"))
                if callable(route):
                    route(self)
                    return
                status, headers, body = route
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.host, self.port = host, self.server.server_port
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def streaming(total_bytes, chunk=64 * 1024):
    def answer(handler):
        handler.send_response(200)
        handler.end_headers()
        sent = 0
        try:
            while sent < total_bytes:
                handler.wfile.write(b"x" * chunk)
                sent += chunk
        except OSError:  # the client stopped reading: what a cap looks like from here
            pass
    return answer


def trickling(seconds, interval=0.2):
    def answer(handler):
        handler.send_response(200)
        handler.end_headers()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                handler.wfile.write(b".")
                handler.wfile.flush()
                time.sleep(interval)
        except OSError:
            pass
    return answer
