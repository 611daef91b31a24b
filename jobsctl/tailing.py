"""Following a run's output by polling the run: what is new since the last look.

The API keeps the tail of a run's output (``output``, at most the service's JOBS_OUTPUT_MAX_BYTES,
headed by a note when earlier bytes were dropped) and counts every byte written
(``output_bytes``). The new part is the last (written now − written before) bytes of the kept
tail; when more was written between two looks than the tail keeps, a note says how much was not
seen. A new attempt starts its output afresh, under a line naming it.
"""

import re

DROPPED_NOTE = re.compile(r"^\[\d+ earlier bytes of \d+ not kept; the last \d+ follow\]\n")
TERMINAL = {"succeeded", "failed", "timed_out", "lost", "skipped", "cancelled"}


class Follower:
    def __init__(self):
        self.attempt = None
        self.seen_bytes = 0
        self.seen_text = ""

    def new_output(self, run):
        """The text written since the last call, from a run as the API answers it."""
        heading = ""
        if run.get("attempt") != self.attempt:
            if self.attempt is not None:
                heading = f"[attempt {run.get('attempt')}]\n"
            self.attempt, self.seen_bytes, self.seen_text = run.get("attempt"), 0, ""
        return heading + self._fresh(run)

    def _fresh(self, run):
        text = run.get("output") or ""
        body = DROPPED_NOTE.sub("", text, count=1)
        total = run.get("output_bytes")
        if not total:  # no count (yet): compare texts
            fresh = body[len(self.seen_text):] if body.startswith(self.seen_text) else body
            self.seen_text = body
            return fresh
        new = total - self.seen_bytes
        if new <= 0:
            return ""
        data = body.encode("utf-8")
        self.seen_bytes, self.seen_text = total, body
        if new <= len(data):
            return data[len(data) - new:].decode("utf-8", errors="replace")
        return f"[{new - len(data)} bytes written meanwhile were not kept]\n" + body
