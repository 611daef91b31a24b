"""What appending to the hash-chained audit trail costs (audit.chain): one entry per transaction, as
an action writes it, timed with the tail's lock (pg_advisory_xact_lock on PostgreSQL) and, for
comparison, the same insert with no chain (a plain INSERT of the same row). Then --threads writers
at once, to see the lock's queue.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench_audit .venv/bin/python bench/audit_append.py
"""

import statistics
import threading
import time

import benchenv
from harness import database

benchenv.setup()

from django.db import connection, transaction  # noqa: E402
from django.db.models import Model  # noqa: E402

from audit import retention, trail  # noqa: E402
from audit.models import AuditEntry, Source  # noqa: E402


def entry(i):
    return trail.entry_of(None, "change", Source.API, actor_name="bench", address="198.51.100.1",
                          changes={"max_retries": [0, i]}, detail=f"bench {i}", name=f"job-{i % 100}")


def chained(i):
    with transaction.atomic():
        entry(i).save()


def plain(i):
    with transaction.atomic():
        Model.save_base(entry(i), raw=True)  # the same INSERT, without the chain's lock and tail read


def timed(append, count):
    took = []
    for i in range(count):
        started = time.perf_counter()
        append(i)
        took.append((time.perf_counter() - started) * 1e6)
    return took


def interleaved(count):
    """Plain and chained appends in turn, each in its own transaction: the disk's commit (fsync)
    weighs the same on both."""
    took = {plain: [], chained: []}
    for i in range(count):
        for append in (plain, chained):
            started = time.perf_counter()
            append(i)
            took[append].append((time.perf_counter() - started) * 1e6)
    return took[plain], took[chained]


def in_one_transaction(append, count):
    """The append alone, with no commit of its own (as inside an action's transaction)."""
    with transaction.atomic():
        return timed(lambda i: Model.save_base(entry(i), raw=True) if append is plain else entry(i).save(), count)


def report(label, took):
    took = sorted(took)
    print(f"{label}: {len(took)} appends, median {statistics.median(took):.0f} µs, "
          f"p95 {took[int(len(took) * 0.95)]:.0f} µs", flush=True)


def main():
    args = benchenv.arguments(__doc__, count=5000, threads=4)
    database.migrate()
    print(f"database: {connection.vendor}", flush=True)
    AuditEntry.objects.all().delete()
    report("plain insert, no chain, inside one transaction", in_one_transaction(plain, args.count))
    AuditEntry.objects.all().delete()  # the chain starts after the plain rows
    report("chained append, inside one transaction", in_one_transaction(chained, args.count))
    AuditEntry.objects.all().delete()
    plain_took, chained_took = interleaved(args.count // 2)
    report("plain insert, no chain, a transaction each", plain_took)
    report("chained append (lock + tail + hash + insert), a transaction each", chained_took)
    AuditEntry.objects.all().delete()
    timed(chained, 10)

    results = []

    def writer():
        results.extend(timed(chained, args.count // args.threads))
        connection.close()

    started = time.perf_counter()
    workers = [threading.Thread(target=writer) for _ in range(args.threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    report(f"chained append, {args.threads} writers at once", results)
    print(f"  {len(results) / elapsed:.0f} appends/s together", flush=True)
    verdict = retention.verify()
    print(f"verify: {'OK' if verdict.ok else verdict.problem}, {verdict.count} entries", flush=True)


if __name__ == "__main__":
    main()
