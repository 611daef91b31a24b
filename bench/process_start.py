"""What starting one of the service's processes costs: ``django.setup()`` (what every process and
every ``manage.py`` command does first), a Celery worker until it says it is ready, and beat until
its first tick, the three alternating. "wall" is from the start to that moment, "CPU" the user and
system time the process (and a worker's pool) took by then: the figure the load of a shared machine
does not stretch.

``--imports`` runs each once more under ``python -X importtime`` and prints where the import time
went: the self time of each top-level package, the largest first (the figures are per run, so the
small ones are noise).

    .venv/bin/python bench/process_start.py --samples 10 [--imports]

It takes the suite's environment (DATABASE_URL, REDIS_URL, SECRET_KEY...); the worker listens on a
queue of its own, so it takes nothing from others on the same Redis database.
"""

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchenv import children, proc_cpu  # noqa: E402

CELERY = [sys.executable, "-m", "celery", "-A", "scheduler_site"]


def commands(workdir):
    return {
        "django.setup()": ([sys.executable, "-c", "import django; django.setup()"], None),
        "worker": ([*CELERY, "worker", "-l", "INFO", "-c", "1", "-Q", "process-start-bench", "-n",
                    "process-start-bench@%h", "--without-gossip", "--without-mingle"], " ready."),
        "beat": ([*CELERY, "beat", "-l", "INFO", "--pidfile=", "-s", str(Path(workdir) / "beat-schedule")],
                 "beat: Starting"),
    }


def one(argv, ready, workdir, python_options=()):
    """Start ``argv`` until a line of its output holds ``ready`` (None: until it ends): (wall seconds,
    CPU seconds, output)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "scheduler_site.settings", "PYTHONPATH": str(REPO),
           "LOG_LEVEL": "INFO"}
    log_path = Path(workdir) / "out.log"
    argv = [argv[0], *python_options, *argv[1:]]
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    if ready is None:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"{argv} failed:\n{log_path.read_text()}")
        return time.monotonic() - started, usage.ru_utime + usage.ru_stime, log_path.read_text(errors="replace")
    try:
        while ready not in log_path.read_text(errors="replace"):
            if proc.poll() is not None:
                raise SystemExit(f"{argv} ended before it was ready:\n{log_path.read_text()}")
            time.sleep(0.01)
        wall = time.monotonic() - started
        cpu = sum(proc_cpu(pid) or 0 for pid in [proc.pid, *children(proc.pid)])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
    return wall, cpu, log_path.read_text(errors="replace")


def import_self_times(output):
    """{top-level package: self import time in seconds} from ``-X importtime`` output."""
    totals = collections.Counter()
    for line in output.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            own, _, name = line[len("import time:"):].split("|")
            totals[name.strip().split(".")[0]] += int(own) / 1e6
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--imports", action="store_true", help="where the import time goes, per package")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="process-start-") as workdir:
        figures = {name: [] for name in commands(workdir)}
        for _ in range(options.samples):
            for name, (argv, ready) in commands(workdir).items():
                figures[name].append(one(argv, ready, workdir)[:2])
        print(f"{options.samples} samples, median (min); load average {os.getloadavg()[0]:.1f}")
        for name, samples in figures.items():
            walls, cpus = zip(*samples, strict=True)
            print(f"  {name:16} wall {statistics.median(walls):.2f} s ({min(walls):.2f})"
                  f"   CPU {statistics.median(cpus):.2f} s ({min(cpus):.2f})")
        if options.imports:
            for name, (argv, ready) in commands(workdir).items():
                times = import_self_times(one(argv, ready, workdir, ("-X", "importtime"))[2])
                top = ", ".join(f"{package} {seconds * 1000:.0f}" for package, seconds in times.most_common(15))
                print(f"  {name}: imports {sum(times.values()):.2f} s, {len(times)} packages; ms: {top}")


if __name__ == "__main__":
    main()
