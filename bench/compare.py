"""The headline benchmarks for two commits side by side, in one invocation on the same machine:
each figure for BASE and HEAD and their ratio (HEAD ÷ BASE), so a regression shows before a merge.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/7 \\
        .venv/bin/python bench/compare.py d8a114e HEAD --jobs 100000

Each commit is checked out into a temporary git worktree (removed at the end). The benchmarks are
this checkout's bench/ scripts, copied into both worktrees (the measurement is the same, the code is
each commit's; ``--own-bench``: each commit's own scripts, for a BASE older than these scripts'
imports). Each benchmark runs for BASE, then at once for HEAD, so the two see the same load:

- dispatch: ``bench/scale.py --jobs N --apply none --between 0 --ahead A --seconds S`` for each N of
  --jobs (the mix of bench/mix.py; dispatch lag p99, beat CPU, beat CPU with nothing due, RSS, load rate);
  ``--queued Q``: with a backlog of Q runs queued and never claimed;
- burst: ``bench/burst.py --runs R --repeat 1 --only on --new-jobs``: R new jobs with the default
  settings due in one second, on a real beat and worker -c 2, on a private PostgreSQL and Redis;
- run now: ``bench/latency.py --samples K``: POST run now → started, and slot → started;
- pages: ``bench/pages.py --runs P --save``: each page's p95;
- pings: ``bench/pings.py --seconds S --jobs 1000``: check-in pings recorded per second, and their
  latency;
- apply: ``bench/apply.py --jobs J --sample 100``: ``manage.py jobs apply`` of J new jobs from a YAML
  and from a JSON file, and of the same file again (jobs per second, CPU of the command's process);
- commands: ``bench/command_start.py --samples K`` (an isolated command's start and CPU) and
  ``bench/burst.py --runs C --repeat 1 --only on --kind command``: C ``true`` commands due in one
  second.

Databases: ``<--database-prefix>_<base|head>[_pages]`` on DATABASE_URL's server, made if missing and
emptied by the benchmarks themselves; the broker is REDIS_URL (flushed by them). Each benchmark's
output is kept in --logs. ``--only`` picks some of them.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.database import database_url, ensure_database
from harness.readings import load_average
from harness.table import markdown, ratio, say

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = ("dispatch", "burst", "latency", "pages", "pings", "apply", "commands")


def git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


class Checkout:
    """A commit in a worktree of its own, with the benchmarks to run."""

    def __init__(self, label, commit, root, args):
        self.label, self.commit = label, git("rev-parse", "--short", commit)
        self.path = root / label
        git("worktree", "add", "--detach", str(self.path), self.commit)
        if not args.own_bench:
            shutil.rmtree(self.path / "bench")
            shutil.copytree(REPO / "bench", self.path / "bench", ignore=shutil.ignore_patterns("__pycache__"))
        self.database, self.runs = f"{args.database_prefix}_{label}", 0

    def remove(self):
        git("worktree", "remove", "--force", str(self.path))

    def run(self, script, argv, logs, database=None, timeout=None):
        """``bench/<script>`` with ``argv`` in this checkout; its output (also written to --logs)."""
        database = database or self.database
        ensure_database(database)
        env = dict(os.environ, PYTHONPATH=str(self.path), DATABASE_URL=database_url(database))
        env.pop("CELERY_BROKER_URL", None)
        self.runs += 1
        log = logs / f"{self.label}-{self.runs:02d}-{script.removesuffix('.py')}.log"
        say(f"  {self.label} ({self.commit}): bench/{script} {' '.join(argv)}  > {log}")
        started = time.monotonic()
        with open(log, "w") as out:
            done = subprocess.run([sys.executable, f"bench/{script}", *argv], cwd=self.path, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout)
        text = log.read_text()
        if done.returncode:
            say(f"    exited {done.returncode} after {time.monotonic() - started:.0f} s; last lines:")
            say("    " + "\n    ".join(text.strip().splitlines()[-5:]))
        return text


def number(text):
    """The first number in a table cell ("8.912", "1,234 / 1,300", "15.3 %"), or None."""
    found = re.search(r"-?[\d,]*\.?\d+", text or "")
    return float(found.group().replace(",", "")) if found else None


def markdown_rows(text, column):
    """The rows of the last markdown table that has a ``column``, as dicts."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("|") and f"| {column} |" in line]
    if not starts:
        return []
    cells = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]  # noqa: E731
    header, rows = cells(lines[starts[-1]]), []
    for line in lines[starts[-1] + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, cells(line), strict=False)))
    return rows


def dispatch_figures(text, n):
    figures = {}
    for row in markdown_rows(text, "p99 lag s"):
        if number(row.get("N")) != n:
            continue
        figures[f"dispatch {n:,}: lag p99, s"] = number(row.get("p99 lag s"))
        figures[f"dispatch {n:,}: lag p50, s"] = number(row.get("p50 lag s"))
        figures[f"dispatch {n:,}: beat CPU, whole window, %"] = number(row.get("beat CPU"))
        figures[f"dispatch {n:,}: beat CPU, nothing due, %"] = number(row.get("idle CPU"))
        figures[f"dispatch {n:,}: beat RSS, MB"] = number(row.get("beat RSS MB"))
        figures[f"dispatch {n:,}: beat's PostgreSQL backends, % of a core"] = number(row.get("beat's PostgreSQL"))
        load = re.search(r"\(([\d,]+)\)", row.get("load s (jobs/s)", ""))
        figures[f"dispatch {n:,}: loading, jobs/s"] = number(load.group(1)) if load else None
    return figures


BURST_ROWS = {"slot → last run ended, s": "burst: slot → last run ended, s",
              "runs per second (first start → last end)": "burst: runs per second",
              "slot → started p95, ms": "burst: slot → started p95, ms",
              "CPU per run, all processes, ms": "burst: CPU per run, all processes, ms",
              "WAL per run, bytes": "burst: WAL per run, B"}


def burst_figures(text):
    figures = {}
    for line in text.splitlines():
        for label, name in BURST_ROWS.items():
            if line.startswith(label) and name not in figures:
                figures[name] = number(line[len(label):])
    return figures


def latency_figures(text):
    figures = {}
    for line in text.splitlines():
        for measure, name in (("ours: POST run now → started_at", "run now → started p95, ms"),
                              ("ours: slot → started_at", "slot → started p95, ms")):
            if line.startswith(measure):
                figures[name] = float(line[len(measure):].split()[2])  # n, p50, p95, ...
    return figures


def pages_figures(path):
    import json

    try:
        saved = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return {f"page p95, ms: {row['page']} [{row['user']}]": row["p95"] for row in saved["rows"]}


def pings_figures(text):
    figures = {}
    for row in markdown_rows(text, "pings/s"):
        figures["pings: recorded per second"] = number(row.get("pings/s"))
        figures["pings: p50, ms"] = number(row.get("p50 ms"))
        figures["pings: p95, ms"] = number(row.get("p95 ms"))
        figures["pings: errors"] = number(row.get("errors"))
    return figures


APPLY_ROWS = {"bulk, create": "jobs apply: create from YAML", "bulk, create from a JSON file": "jobs apply: create from JSON",
              "bulk, the same file again": "jobs apply: the same file again"}


def apply_figures(text):
    """bench/apply.py's table: | what | jobs | seconds | CPU s | jobs/s | ... |."""
    figures = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 5 and cells[0] in APPLY_ROWS:
            figures[f"{APPLY_ROWS[cells[0]]}, jobs/s"] = number(cells[4])
            figures[f"{APPLY_ROWS[cells[0]]}, CPU s"] = number(cells[3])
    return figures


def command_start_figures(text):
    for line in text.splitlines():
        if line.startswith("namespace "):
            cells = line.split()[1:]
            return {"isolated command: start p50, ms": float(cells[0]), "isolated command: start p95, ms": float(cells[1]),
                    "isolated command: CPU, ms": float(cells[6])}
    return {}


def measure(checkouts, args, logs):
    """{figure: {label: value}} of every benchmark chosen, BASE then HEAD for each."""
    found = {}

    def note(label, figures):
        for name, value in figures.items():
            found.setdefault(name, {})[label] = value

    for bench in args.only:
        say(f"== {bench}")
        for checkout in checkouts:
            if bench == "dispatch":
                for n in args.jobs:
                    text = checkout.run("scale.py", ["--jobs", str(n), "--apply", "none", "--between", "0",
                                                     "--ahead", str(args.ahead), "--seconds", str(args.seconds),
                                                     "--queued", str(args.queued)], logs)
                    note(checkout.label, dispatch_figures(text, n))
            elif bench == "burst":
                text = checkout.run("burst.py", ["--runs", str(args.burst), "--repeat", "1", "--only", "on",
                                                 "--new-jobs"], logs)
                note(checkout.label, burst_figures(text))
            elif bench == "latency":
                text = checkout.run("latency.py", ["--samples", str(args.samples)], logs)
                note(checkout.label, latency_figures(text))
            elif bench == "pages":
                saved = logs / f"pages-{checkout.label}.json"
                checkout.run("pages.py", ["--runs", str(args.pages_runs), "--save", str(saved)], logs,
                             database=f"{checkout.database}_pages_{args.pages_runs}")
                note(checkout.label, pages_figures(saved))
            elif bench == "pings":
                text = checkout.run("pings.py", ["--seconds", str(min(args.seconds, 60)), "--jobs", "1000"], logs)
                note(checkout.label, pings_figures(text))
            elif bench == "apply":
                text = checkout.run("apply.py", ["--jobs", str(args.apply_jobs), "--sample", "100"], logs)
                note(checkout.label, apply_figures(text))
            elif bench == "commands":
                text = checkout.run("command_start.py", ["--samples", str(args.samples * 3)], logs)
                note(checkout.label, command_start_figures(text))
                text = checkout.run("burst.py", ["--runs", str(args.commands), "--repeat", "1", "--only", "on",
                                                 "--kind", "command"], logs)
                note(checkout.label, {name.replace("burst:", "commands:"): value
                                      for name, value in burst_figures(text).items()})
        report(checkouts, found)
    return found


def report(checkouts, found):
    base, head = (c.label for c in checkouts)
    say("")
    markdown(["figure", f"BASE {checkouts[0].commit}", f"HEAD {checkouts[1].commit}", "HEAD ÷ BASE"],
             [[name, fmt(values.get(base)), fmt(values.get(head)), ratio(values.get(head), values.get(base))]
              for name, values in found.items()], "lrrr")
    say("")


def fmt(value):
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base")
    parser.add_argument("head")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--jobs", type=int, nargs="+", default=[100000, 1000000], help="dispatch's sizes")
    parser.add_argument("--seconds", type=int, default=240, help="dispatch's scheduler window")
    parser.add_argument("--ahead", type=float, default=10.0, help="JOBS_DISPATCH_AHEAD_SECONDS for dispatch")
    parser.add_argument("--queued", type=int, default=0, help="dispatch: runs queued and never claimed first")
    parser.add_argument("--burst", type=int, default=10000, help="new jobs due in one second")
    parser.add_argument("--samples", type=int, default=100, help="run-now and slot samples of bench/latency.py")
    parser.add_argument("--apply-jobs", type=int, default=100000, help="new jobs in bench/apply.py's file")
    parser.add_argument("--commands", type=int, default=10000, help="true commands due in one second")
    parser.add_argument("--pages-runs", type=int, default=100000, help="runs bench/pages.py seeds")
    parser.add_argument("--database-prefix", default="bench_compare")
    parser.add_argument("--logs", default=None, help="where each benchmark's output is kept (default: a temp dir)")
    parser.add_argument("--own-bench", action="store_true", help="each commit's own bench/ scripts")
    args = parser.parse_args()
    logs = Path(args.logs or tempfile.mkdtemp(prefix="bench-compare-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    checkouts = []
    say(f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {args.base} against {args.head}; load average "
        f"{load_average()}; logs in {logs}")
    try:
        for label, commit in (("base", args.base), ("head", args.head)):
            checkouts.append(Checkout(label, commit, root, args))
        found = measure(checkouts, args, logs)
    finally:
        for checkout in checkouts:
            checkout.remove()
        shutil.rmtree(root, ignore_errors=True)
    say(f"=== {args.base} ({checkouts[0].commit}) against {args.head} ({checkouts[1].commit}), "
        f"load average at the end {load_average()}")
    report(checkouts, found)


if __name__ == "__main__":
    main()
