"""Python's cyclic garbage collector, paused while one operation makes objects by the hundred thousand.

The collector's full passes walk every live object, and a jobs file's plan and save keep each entry,
job and version alive until they end: at 100,000 jobs its passes took a third of ``jobs apply``'s
CPU, and freed almost nothing (55,000 objects, 0.2 s, collected once at the end; the peak memory was
the same, docs/BENCHMARKS.md). What is freed by reference counting still is, at once.

The collector is the process's: in a threaded web worker a pause holds for its other threads too, for
as long as an apply lasts. Pauses nest, and the last one to end starts it again."""

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_paused = 0
_was_enabled = False


@contextmanager
def paused():
    global _paused, _was_enabled
    with _lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()
