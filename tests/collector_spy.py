"""Whether Python's cyclic collector was running when a function was called (jobs.collector)."""

import gc


def note_collector(monkeypatch, running, owner, attribute, name):
    """Wrap ``owner.attribute`` so that each call records ``gc.isenabled()`` in ``running[name]``."""
    function = getattr(owner, attribute)

    def call(*args, **kwargs):
        running[name] = gc.isenabled()
        return function(*args, **kwargs)

    monkeypatch.setattr(owner, attribute, call)
