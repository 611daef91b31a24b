"""Job functions used by the tests. Each appends the attempt it is ("<run id>:<attempt>") to a ledger
file, so a test can see how many times a run's side effect happened; ``test.keys`` appends the
idempotency key it was given. The Celery tasks at the end (``tests.add``, ``tests.keyed``) are what a
``task`` job runs."""

import json
import os
import re
import tempfile
import time

from celery import shared_task

from jobs.kinds.callable.registry import job_function


def _append(ledger, line):
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def attempt_of(context):
    return f"{context.run_id}:{context.attempt}"


@job_function("test.keys")
def keys(path, fail_times=0, hold_first_seconds=0.0, marker=None, context=None):
    """Appends "key <idempotency key> <attempt> <run id>"; holds its first attempt ``hold_first_seconds``
    (long enough to kill it), fails its first ``fail_times`` attempts, and fails while ``marker`` exists."""
    _append(path, f"key {context.idempotency_key} {context.attempt} {context.run_id}")
    if context.attempt == 1:
        time.sleep(float(hold_first_seconds))
    if context.attempt <= int(fail_times):
        raise RuntimeError(f"failing attempt {context.attempt} on purpose")
    if marker and os.path.exists(marker):
        raise RuntimeError(f"failing on purpose while {marker} exists")
    return {"key": context.idempotency_key}


@job_function("test.ledger")
def ledger(path, seconds=0.0, context=None):
    _append(path, f"start {attempt_of(context)} {time.time()}")
    time.sleep(float(seconds))
    _append(path, f"end {attempt_of(context)} {time.time()}")
    return {"attempt": attempt_of(context)}


@job_function("test.ledger_held")
def ledger_held(path, release, seconds=60.0, context=None):
    """``test.ledger`` that holds until the file ``release`` exists (at most ``seconds``): a run that
    lasts as long as its test needs, however slow the machine is to start what the test starts next."""
    _append(path, f"start {attempt_of(context)} {time.time()}")
    deadline = time.monotonic() + float(seconds)
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    _append(path, f"end {attempt_of(context)} {time.time()}")
    return {"attempt": attempt_of(context)}


@job_function("test.ledger_pid")
def ledger_pid(path, seconds=0.0, context=None):
    """test.ledger's lines with the PID of the pool process that ran the attempt as a fourth field."""
    _append(path, f"start {attempt_of(context)} {time.time()} {os.getpid()}")
    time.sleep(float(seconds))
    _append(path, f"end {attempt_of(context)} {time.time()} {os.getpid()}")


@job_function("test.ledger_first_is_long")
def ledger_first_is_long(path, marker, seconds, context=None):
    """``test.ledger`` that takes ``seconds`` for whichever run starts first (it makes ``marker``), no
    time for the others: the first of a bundle's runs is its long one."""
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        seconds = 0.0
    return ledger(path, seconds, context=context)


@job_function("test.ledger_slow_first")
def ledger_slow_first(path, first_seconds, seconds=0.0, context=None):
    """``test.ledger`` whose first attempt takes ``first_seconds`` (long enough to kill it)."""
    return ledger(path, first_seconds if context.attempt == 1 else seconds, context=context)


@job_function("test.ticks")
def ticks(path, count, context=None):
    """Writes "<attempt> <epoch>" every 0.25 s, ``count`` times (the function twin of the chaos
    tests' ticking command)."""
    for _ in range(int(count)):
        _append(path, f"{context.attempt} {time.time()}")
        time.sleep(0.25)
    return {"attempt": attempt_of(context)}


@job_function("test.flaky")
def flaky(fail_times, path=None, context=None):
    if path:
        _append(path, f"attempt {attempt_of(context)} {time.time()}")
    if context.attempt <= int(fail_times):
        raise RuntimeError(f"failing attempt {context.attempt} on purpose")
    return {"succeeded_on": context.attempt}


@job_function("test.fail_while")
def fail_while(marker, path=None, context=None):
    """Fails while the file ``marker`` exists: a job a test can fix between two runs."""
    if path:
        _append(path, f"start {attempt_of(context)} {time.time()}")
    if os.path.exists(marker):
        raise RuntimeError(f"failing on purpose while {marker} exists")
    if path:
        _append(path, f"end {attempt_of(context)} {time.time()}")
    return {"ok": True}


@job_function("test.barrier")
def barrier(path, tag, parties=2, timeout=30.0, context=None):
    """Waits until ``parties`` runs have reached the barrier ``tag``, then returns at once, so that
    they finish together."""
    _append(path, f"arrive-{tag} {attempt_of(context)} {time.time()}")
    deadline = time.monotonic() + float(timeout)
    while True:
        with open(path) as f:
            if sum(line.startswith(f"arrive-{tag} ") for line in f) >= int(parties):
                break
        if time.monotonic() > deadline:
            raise RuntimeError(f"barrier {tag}: the other runs never arrived")
        time.sleep(0.005)
    _append(path, f"end {attempt_of(context)} {time.time()}")
    return {"tag": tag}


@job_function("test.chatty")
def chatty(lines, every=0.5, context=None):
    """Prints ``lines`` numbered lines, one each ``every`` seconds: output that grows while it runs."""
    for number in range(1, int(lines) + 1):
        print(f"chatty line {number}")
        time.sleep(float(every))
    return {"lines": lines}


@job_function("test.sleepy")
def sleepy(path, seconds, ignore_soft_limit=False, context=None):
    """Sleeps ``seconds``; at Celery's soft time limit it stops, or carries on when told to ignore it
    (only the hard limit can end it then)."""
    from celery.exceptions import SoftTimeLimitExceeded

    _append(path, f"start {attempt_of(context)} {time.time()}")
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except SoftTimeLimitExceeded:
            _append(path, f"soft-limit {attempt_of(context)} {time.time()}")
            if not ignore_soft_limit:
                raise
    _append(path, f"end {attempt_of(context)} {time.time()}")
    return {"slept": seconds}


@job_function("test.claim_lost")
def claim_lost(path, context=None):
    """Runs once, and meanwhile leaves what a database crash right after the claim leaves: the run
    queued again at this attempt, its attempt row gone (tests.test_worker_path)."""
    from jobs.models import JobRun, RunStatus

    _append(path, f"start {attempt_of(context)} {time.time()}")
    lose_claim(context.run_id, context.attempt)
    assert JobRun.objects.get(pk=context.run_id).status == RunStatus.QUEUED
    return {"attempt": attempt_of(context)}


def lose_claim(run_id, attempt):
    """The state a crash of the database leaves when it loses a claim's commit (the claim commits
    without waiting for its flush): the run as it was before, queued at this attempt, no attempt row."""
    from django.db import transaction

    from jobs.models import JobAttempt, JobRun, RunStatus

    with transaction.atomic():
        JobAttempt.objects.filter(run_id=run_id, number=attempt).delete()
        JobRun.objects.filter(pk=run_id, attempt=attempt).update(status=RunStatus.QUEUED, worker="", started_at=None,
                                                                 heartbeat_at=None)


@job_function("test.flood")
def flood(print_bytes=0, result_bytes=0, error_bytes=0, context=None):
    """Prints ``print_bytes`` bytes, then fails with an error of ``error_bytes`` (when given) or
    returns a result of ``result_bytes`` in JSON."""
    print("p" * int(print_bytes), end="")
    if error_bytes:
        raise RuntimeError("e" * int(error_bytes))
    return {"blob": "r" * int(result_bytes)}


@job_function("test.nul")
def nul(fail=False, context=None):
    """Prints "a<NUL>b" and returns it ({"text": ...}), or fails with it as the error."""
    text = "a\x00b"
    print(text)
    if fail:
        raise RuntimeError(text)
    return {"text": text}


@job_function("test.params")
def params(path, context=None, **values):
    """Appends "params <run id> <JSON of each keyword argument but path as [type name, value as text]>": what a
    function receives of its run's parameters (merged over the job's kwargs)."""
    shown = {name: [type(value).__name__, str(value)] for name, value in sorted(values.items())}
    _append(path, f"params {context.run_id} {json.dumps(shown, sort_keys=True)}")
    return shown


# --- exactly once (tests/chaos/test_exactly_once.py): a row per execution in the service's database

ROWS_TABLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _insert_then_sleep(table, path, seconds, context):
    """Inserts a row (run id, attempt) into ``table`` (a table the test made in the service's
    database), says so in the ledger ``path``, sleeps ``seconds`` (long enough to be killed), and
    says it ended."""
    from django.db import connection

    if not ROWS_TABLE.match(table):
        raise ValueError(f"not a table name: {table!r}")
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (run_id, attempt) VALUES (%s, %s)", [context.run_id, context.attempt])
    _append(path, f"start {attempt_of(context)} {time.time()}")
    time.sleep(float(seconds))
    _append(path, f"end {attempt_of(context)} {time.time()}")
    return {"attempt": attempt_of(context)}


@job_function("test.insert_row_once", transactional=True)
def insert_row_once(table, path, seconds=1.0, context=None):
    """The transactional job: its row and its run's success commit together."""
    return _insert_then_sleep(table, path, seconds, context)


@job_function("test.insert_row")
def insert_row(table, path, seconds=1.0, context=None):
    """Its non-transactional twin: the row commits at once (at-least-once)."""
    return _insert_then_sleep(table, path, seconds, context)


@job_function("test.insert_row_then_fail", transactional=True)
def insert_row_then_fail(table, path, seconds=0.0, context=None):
    """Transactional, and fails after its insert: the row goes with the failure."""
    _insert_then_sleep(table, path, seconds, context)
    raise RuntimeError("failing after the insert on purpose")
def nemesis_line(ledger_dir, event, context, extra=""):
    """One line of the nemesis ledger (tests/nemesis): a file per host, written by the execution
    itself, outside the service: "<event> <run id> <attempt> <host> <uptime> <wall>[ <extra>]". The
    kernel's uptime is the machine's true clock (libfaketime, which skews a host's clock, leaves
    /proc/uptime alone); the wall clock is the host's own."""
    host = os.environ.get("NEMESIS_HOST", "core")
    with open("/proc/uptime") as uptime:
        since_boot = uptime.read().split()[0]
    line = f"{event} {context.run_id} {context.attempt} {host} {since_boot} {time.time():.6f}"
    _append(os.path.join(ledger_dir, f"ledger-{host}.txt"), f"{line} {extra}".rstrip())


@job_function("test.nemesis")
def nemesis(ledger_dir, seconds=0.0, fail_attempts=0, spool_kib=0, context=None):
    """Appends start and end of each execution to the host's ledger (tests/nemesis); takes
    ``seconds``, writes ``spool_kib`` KiB to a temporary file (in TMPDIR), and fails its first
    ``fail_attempts`` attempts on purpose, or when the spool does not fit (its end says "fail")."""
    nemesis_line(ledger_dir, "start", context)
    time.sleep(float(seconds))
    try:
        if spool_kib:
            with tempfile.TemporaryFile() as spool:
                spool.write(b"\0" * 1024 * int(spool_kib))
                spool.flush()
    except OSError as exc:
        nemesis_line(ledger_dir, "end", context, "fail")
        raise RuntimeError(f"cannot spool: {exc}") from None
    failing = context.attempt <= int(fail_attempts)
    nemesis_line(ledger_dir, "end", context, "fail" if failing else "ok")
    if failing:
        raise RuntimeError(f"failing attempt {context.attempt} on purpose")
    return {"attempt": attempt_of(context)}


@shared_task(name="tests.add")
def add(x, y, path=None):
    """A plain Celery task: prints, and returns the sum."""
    print(f"adding {x} and {y}")
    if path:
        _append(path, f"add {x} {y}")
    return x + y


@shared_task(bind=True, name="tests.keyed")
def keyed(self, path, fail_times=0, seconds=0.0):
    """A bound task: appends "key <idempotency key> <attempt> <run id> <retries>" from ``self.request`` and prints
    "attempt <n> started", sleeps ``seconds``, and asks Celery for a retry (``self.retry``) on its first
    ``fail_times`` attempts."""
    request = self.request
    _append(path, f"key {request.idempotency_key} {request.attempt} {request.run_id} {request.retries}")
    print(f"attempt {request.attempt} started", flush=True)
    time.sleep(float(seconds))
    if request.attempt <= int(fail_times):
        raise self.retry(exc=RuntimeError(f"failing attempt {request.attempt} on purpose"))
    _append(path, f"done {request.attempt}")
    return {"key": request.idempotency_key, "attempt": request.attempt}
