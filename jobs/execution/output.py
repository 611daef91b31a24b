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
        return last_bytes(kept, total, self.limit), total

    def text(self):
        return self.snapshot()[0]


def last_bytes(data, total, limit):
    """The end of ``data`` (bytes: the last of ``total`` written) as text of at most ``limit``
    bytes in UTF-8, led by a line saying how much was not kept when anything was not."""
    if total <= limit and len(data) == total:
        text = data.decode("utf-8", errors="replace")
        if len(text.encode()) <= limit:
            return text
    room = max(limit - len(_not_kept(total, total, total)), 0)
    # Decoded first (an invalid byte becomes U+FFFD, three bytes), then cut: only the first
    # character can be split by the cut, and it is dropped.
    kept = data[-room:].decode("utf-8", errors="replace").encode()[-room:].decode("utf-8", errors="ignore") if room else ""
    return _not_kept(total - len(kept.encode()), total, len(kept.encode())) + kept


def first_bytes(text, limit, note=True):
    """``text`` cut to at most ``limit`` bytes in UTF-8, ending with a note of its size when cut
    (unless ``note`` is false)."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    note = f"… [{len(data)} bytes in all; the rest not kept]" if note else ""
    room = max(limit - len(note.encode()), 0)
    return data[:room].decode("utf-8", errors="ignore") + note


def _not_kept(dropped, total, kept):
    return f"[{dropped} earlier bytes of {total} not kept; the last {kept} follow]\n"


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
