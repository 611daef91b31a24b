class UnsafeRequest(Exception):
    """Base of every outbound error; ``str()`` is a sentence for the person who set the URL."""


class Refused(UnsafeRequest):
    """The URL, or an address its name resolves to, may not be reached."""


class TooLarge(UnsafeRequest):
    """The answer was longer than the cap; reading stopped there."""


class TimedOut(UnsafeRequest):
    """No complete answer within the time allowed."""


class RequestFailed(UnsafeRequest):
    """The request could not be made (no such name, connection refused, TLS error...)."""
