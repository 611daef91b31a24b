"""A local HTTP server for the tests' stand-ins of outside services: it listens on a free port of
this machine and serves in a thread from entering its ``with`` block to leaving it. No tests here."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


class LocalHTTPServer:
    def __init__(self, handler, host="127.0.0.1"):
        self.server = ThreadingHTTPServer((host, 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
