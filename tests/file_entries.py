"""Entries of a large jobs file, the shapes of a real one (a few hundred distinct values of each key):
tests/test_jobs_apply_bulk.py applies them, bench/apply.py times them."""

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"]


def mixed_entry(i, name, source):
    """Job ``i``, named ``name``; ``source`` goes in an HTTP job's header."""
    job = {"name": name}
    if i % 5 == 4:
        job.update(kind="http", target=f"https://api.example.com/hooks/{i}", http_method="POST",
                   http_headers={"X-Source": source})
    else:
        job.update(kind="callable", target="builtin.noop", kwargs={"n": i})
    if i % 10 < 6:
        job["schedule"] = {"type": "cron", "cron": f"{i % 60} {i // 60 % 24} * * *", "timezone": ZONES[i % 4]}
    elif i % 10 < 9:
        job["schedule"] = {"type": "interval", "every_seconds": 60 * (1 + i % 30)}
    elif i % 100 == 9:
        job["schedule"] = {"type": "once", "run_at": f"2031-{1 + i % 12:02d}-01T00:00:00+00:00"}
    else:
        job["schedule"] = {"type": "manual"}
    if i % 3 == 0:
        job["tags"] = ["team-a", f"shard-{i % 16}"]
    if i % 4 == 0:
        job.update(max_retries=3, sla_seconds=600)
    return job
