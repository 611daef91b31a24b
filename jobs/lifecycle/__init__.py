"""The life of a run: every state change of a ``JobRun``, in one place.

```
pending ─► queued ─► running ─► succeeded
   │          │         ├──────► failed ────┐
   │          │         ├──────► timed_out ─┼─(retries left)─► retrying ─► queued
   │          │         └──────► lost ──(lost budget left, no backoff)─► queued; else lost (terminal)
   │          ├──► skipped   (overlap policy, start deadline, catch-up policy)
   └──────────┴──► cancelled (by a person or the API)
```

- ``runs``: creating runs (one, or many in bulk for the scheduler and backfill) and the moves outside
  an attempt: queue, publish again, skip, cancel, give up on a run that never started;
- ``attempts``: the worker's side: claim (and restore a claim a crash lost), heartbeat, succeed, fail, lose;
  and succeed in one transaction with the job's own writes (exactly once, transactional functions);
- ``streaks``: a job's failures in a row, counted where runs end, and the auto-pause they lead to;
- ``postgres``: the claim and the success as single statements, the same moves as ``attempts``;
- ``ahead``: a crowded slot's runs, queued seconds ahead of it, their messages held until the slot;
- ``bundles``: the same moves for the many short runs of one message (a bundle): claimed, beaten and
  their successes recorded a statement for them all; ``bundling`` says which runs go together;
- ``limits``: limits shared across jobs, at the claim (a run waits for room; ``runs`` wakes it);
- ``rollup``: the ends of runs folded into the figures the pages show (counts by hour, recent
  durations);
- ``moves``: the state machine (``MOVES``) and the conditional transition every move goes through;
- ``backoff``: how long a failed run waits before its next attempt;
- ``pings``: the runs of check-in jobs, made and ended by their pings, and the slots that got none;
- ``ping_queue``: the pings the web queued in Redis, recorded in batches by the scheduler leader;
- ``events``: who hears that a run moved (notifications, workflows subscribe; the lifecycle
  imports neither).

Each move is one conditional transition (``moves.transition`` along ``moves.MOVES``), so two
processes can never both move a run; times come from the database's clock (``jobs.timing.clock``).
"""

from .ahead import adopt as adopt_runs_ahead
from .ahead import publish_due as publish_runs_ahead
from .attempts import (
    DUPLICATES_DROPPED,
    OutcomeRefused,
    claim,
    declared_lost,
    heartbeat,
    lose_if_holder_died,
    record_failure,
    record_success,
    restore_claim,
    succeed_in_one_transaction,
)
from .bundles import Success, claim_many, hand_back, heartbeat_many, mark_started, started_at, succeed_many
from .events import ENDED, subscribe
from .ping_queue import record as record_queued_pings
from .pings import NO_PING, Ping, fail_unpinged, pinged_job, record_ping
from .rollup import fold as fold_ends
from .rollup import recount as recount_ends
from .runs import (
    cancel,
    create_run,
    create_runs,
    give_up_waiting,
    message_for,
    miss_if_past_deadline,
    publish_again,
    publish_many,
    publish_on_commit,
    queue_due_retries,
    release_held,
    release_pending,
    release_timed,
    rerun,
    skip_past_deadline,
    time_limits,
    wake_all_waiting,
    wake_waiting,
)

__all__ = [
    "DUPLICATES_DROPPED", "ENDED", "OutcomeRefused", "Success", "adopt_runs_ahead", "publish_runs_ahead", "cancel", "claim", "claim_many", "hand_back",
    "heartbeat_many", "mark_started", "started_at", "succeed_many", "create_run", "create_runs", "declared_lost",
    "fold_ends", "give_up_waiting", "NO_PING", "Ping", "fail_unpinged", "pinged_job", "record_ping", "record_queued_pings",
    "heartbeat", "recount_ends",
    "lose_if_holder_died", "message_for", "miss_if_past_deadline", "publish_again", "publish_many",
    "publish_on_commit", "queue_due_retries", "record_failure", "record_success", "restore_claim", "release_held", "release_pending", "release_timed", "rerun",
    "skip_past_deadline", "subscribe", "succeed_in_one_transaction", "time_limits", "wake_all_waiting",
    "wake_waiting",
]
