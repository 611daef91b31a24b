class OutputTail:
    """Keeps the last ``limit`` bytes of a stream and counts every byte written."""

    def __init__(self, limit):
        self.limit = limit
        self.total = 0
        self._buffer = bytearray()

    def write(self, chunk):
        self.total += len(chunk)
        self._buffer += chunk
        if len(self._buffer) > 2 * self.limit:
            del self._buffer[: len(self._buffer) - self.limit]

    def text(self):
        kept = bytes(self._buffer[-self.limit :])
        body = kept.decode("utf-8", errors="replace")
        dropped = self.total - len(kept)
        if dropped > 0:
            return f"[{dropped} earlier bytes of {self.total} not kept; the last {len(kept)} follow]\n{body}"
        return body
