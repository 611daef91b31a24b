"""What an attempt prints: the kept tail, readable while the attempt runs, and a router that sends a
function job's prints to its tail."""

import contextlib
import sys
import threading


class OutputTail:
    """Keeps the last ``limit`` bytes of a stream and counts every byte written.

    Written by the thread that reads the job's output, read by the heartbeat thread while the
    attempt runs (``snapshot``): hence the lock."""

    def __init__(self, limit):
        self.limit = limit
        self.total = 0
        self._buffer = bytearray()
        self._lock = threading.Lock()

    def write(self, chunk):
        with self._lock:
            self.total += len(chunk)
            self._buffer += chunk
            if len(self._buffer) > 2 * self.limit:
                del self._buffer[: len(self._buffer) - self.limit]

    def snapshot(self):
        """(text, total bytes written) at one moment."""
        with self._lock:
            kept, total = bytes(self._buffer[-self.limit :]), self.total
        body = kept.decode("utf-8", errors="replace")
        dropped = total - len(kept)
        if dropped > 0:
            return f"[{dropped} earlier bytes of {total} not kept; the last {len(kept)} follow]\n{body}", total
        return body, total

    def text(self):
        return self.snapshot()[0]


_capturing = threading.local()
_install_lock = threading.Lock()


class _Router:
    """Stands in for sys.stdout or sys.stderr: what a thread prints while it captures goes to its
    tail, anything else to the stream it replaced (Celery's logging proxy in a worker)."""

    def __init__(self, original):
        self.original = original

    def write(self, text):
        tail = getattr(_capturing, "tail", None)
        if tail is None:
            return self.original.write(text)
        tail.write(text.encode("utf-8", errors="replace"))
        return len(text)

    def flush(self):
        if getattr(_capturing, "tail", None) is None:
            self.original.flush()

    def __getattr__(self, name):
        return getattr(self.original, name)


def _install():
    with _install_lock:
        for name in ("stdout", "stderr"):
            if not isinstance(getattr(sys, name), _Router):
                setattr(sys, name, _Router(getattr(sys, name)))


@contextlib.contextmanager
def capture_prints(tail):
    """Send what this thread writes to sys.stdout and sys.stderr to ``tail`` inside the block
    (per thread, so it holds with a thread pool too). Output written straight to the file
    descriptors (a C library, a subprocess) is not seen."""
    _install()
    _capturing.tail = tail
    try:
        yield tail
    finally:
        _capturing.tail = None
