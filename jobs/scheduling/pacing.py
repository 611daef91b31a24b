"""How often the leader's passes over unfinished runs may run: at most once per interval, and then
only after resting REST times as long as the last passes took.

The lost-run check and the monitor find running and waiting runs among every unfinished one
(run_active_idx holds queued and running runs under one phase, so that a claim writes no index).
A backlog of queued runs, such as every worker down for an hour in a large deployment, makes each
pass read all of it: 950 ms at 1,190,000 queued runs, once a second, was most of what the leader
did at 10,000,000 schedules. Resting in proportion bounds each pass to 1/(REST + 1) of the leader's
time whatever the backlog, while a pass of a few milliseconds still runs every interval.

What a pass costs is its time in the database, its statements' durations added up: that is what
grows with the backlog. Its time waiting on the broker is not: with the broker down, one look at a
queue's depth waits 2 s for a connection that is refused twice, and a pass paced by that rested 80 s
while its runs waited to be published again (tests/chaos/test_service_faults.py, RabbitMQ, 2026-11-30).
And what sets the rest is the lesser of the last two passes' times: a backlog makes every pass slow,
while a statement held up once (a lock waited for, the database frozen for a moment) makes one.

A slow pass also holds up the tick it runs in, and a slot falling due meanwhile waits for it: it waits
instead while something falls due before it would end, for at most POSTPONE_INTERVALS of its intervals.
"""

import contextlib
import logging
import time

from django.db import connection

logger = logging.getLogger(__name__)

# Two paced passes (the lost check and the monitor) at 1/41 each: at most ~5 % of the leader's time.
REST = 40
SLOW = 0.1  # seconds: a pass this long may hold up a slot (the scheduler wakes at least every 0.1 s)
POSTPONE_INTERVALS = 10


class Pace:
    """When a pass may run next, from how long its last runs took (``clock``: seconds, monotonic)."""

    def __init__(self, name, interval, clock=time.monotonic):
        self.name, self.interval, self.clock = name, interval, clock
        self.next_at = 0.0
        self.took = None  # the last pass's time in the database
        self.cost = 0.0  # what the rest is in proportion to: the lesser of the last two passes' times
        self.lasted = 0.0  # the last pass from its start to its end, the broker's time included

    def due(self, now=None):
        return (self.clock() if now is None else now) >= self.next_at

    def may_run(self, now, until_due):
        """Due, and clear of what falls due next: a slow pass runs only if ``until_due()`` (seconds until
        the scheduler has work) leaves it twice the last pass's length, or once it has waited long enough.
        (Its length, not its cost: what holds a slot up is the whole pass, publishing included.)"""
        if not self.due(now):
            return False
        if self.lasted < SLOW or now - self.next_at >= POSTPONE_INTERVALS * self.interval:
            return True
        return until_due() > 2 * self.lasted

    @contextlib.contextmanager
    def timed(self):
        """Around one pass: its time in the database (the statements it sends through Django's cursors)
        sets when the next may run, also when it fails, so a failing pass rests for what it read."""
        started = self.clock()
        in_database = [0.0]

        def timed_statement(execute, sql, params, many, context):
            began = self.clock()
            try:
                return execute(sql, params, many, context)
            finally:
                in_database[0] += self.clock() - began

        try:
            with connection.execute_wrapper(timed_statement):
                yield
        finally:
            ended = self.clock()
            took = in_database[0]
            last = took if self.took is None else self.took  # the first pass: as if the one before took as long
            self.took, self.cost, self.lasted = took, min(took, last), ended - started
            rest = REST * self.cost
            self.next_at = max(started + self.interval, ended + rest)
            if rest > 10 * self.interval:  # a delay an operator would notice in when a lost run is seen
                logger.warning("scheduler: the %s took %.2f s in the database, and %.2f s the time before (it "
                               "reads every unfinished run); it runs again in %.0f s, not %g s", self.name, took,
                               last, self.next_at - ended, self.interval)
