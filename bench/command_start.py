"""What a command's own namespaces cost at its start: a command job's start with
``JOBS_COMMAND_ISOLATION`` off (the shell in a process group of its own) and in PID and mount
namespaces of its own (jobs/kinds/command/isolation.py), the two alternating, in one invocation.

Each sample starts ``echo started; exit 0`` as a command job's executor does (the job's
environment, as ``JOBS_COMMAND_USER`` on a root worker, the default rlimits (JOBS_COMMAND_RLIMIT_NPROC,
JOBS_COMMAND_RLIMIT_NOFILE), with --limits a memory limit as well): isolated, from the pool
process's zygote (``isolation.start``) or, on a commit before it, through setpriv, prlimit and
unshare; off, through Popen. "start" is the time from the call to the command's first line read
from its pipe; "whole" to its end, namespace emptied included; "CPU" the user and system time of
this process, its children and the zygote's, the one figure that the load of a shared machine does
not stretch.

    .venv/bin/python bench/command_start.py --samples 300 [--limits]
"""

import os
import resource
import subprocess
import time

import benchenv
from harness import readings
from harness.readings import pct

benchenv.setup()

from jobs.kinds.command import isolation, limits  # noqa: E402
from jobs.models import Job  # noqa: E402

COMMAND = "echo started; exit 0"


TICK = os.sysconf("SC_CLK_TCK")


def zygote_cpu():
    """CPU seconds of this process's zygotes and what they reaped (0 on a commit without them)."""
    return sum(readings.cpu_ticks(pid) for child in readings.children(os.getpid())  # unshare, then the zygote
               for pid in readings.children(child)) / TICK


def start(isolated, job):
    run_as, env = limits.run_as()
    env = {**os.environ, **env}
    if isolated and hasattr(isolation, "start"):
        return isolation.start(COMMAND, env, None, 0o022, run_as, limits.rlimits(job))
    if isolated:  # the commits before the zygote
        command, popen = isolation.argv(limits.prlimit_argv(job), run_as, COMMAND)
    else:
        command, popen = [*isolation.no_new_privileges(), *limits.prlimit_argv(job), "/bin/sh", "-c", COMMAND], run_as
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True, **popen)


def one(isolated, job):
    before = cpu_now()
    began = time.perf_counter()
    process = start(isolated, job)
    first = process.stdout.readline()
    started = time.perf_counter()
    process.stdout.read()
    process.wait()
    ended = time.perf_counter()
    process.stdout.close()
    returncode = process.returncode
    if not hasattr(isolation, "start") and isolated:
        returncode = isolation.returncode(returncode)
    if first.strip() != b"started" or returncode != 0:
        raise SystemExit(f"the command failed ({returncode}): {first!r}")
    return started - began, ended - began, cpu_now() - before


def cpu_now():
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + zygote_cpu()


def main():
    args = benchenv.arguments(__doc__, samples=300, limits=(False, "with a memory and a process limit"))
    reason = isolation.unavailable()
    if reason:
        raise SystemExit(f"this host cannot isolate commands: {reason}")
    job = Job(kind="command", target=COMMAND, memory_limit_mb=512 if args.limits else None,
              max_processes=1000 if args.limits else None)
    results = {False: ([], [], []), True: ([], [], [])}
    for _ in range(5):  # warm the page cache
        one(False, job), one(True, job)
    for i in range(args.samples * 2):
        isolated = bool(i % 2)
        for kept, value in zip(results[isolated], one(isolated, job), strict=True):
            kept.append(value)
    user = "root" if os.geteuid() == 0 and not limits.run_as()[0] else limits.run_as()[0] and "JOBS_COMMAND_USER"
    print(f"{args.samples} starts each, alternating; worker euid {os.geteuid()}, commands as {user or 'itself'}"
          f"{', with a memory and a process limit' if args.limits else ''}; "
          f"isolated through {'a zygote' if hasattr(isolation, 'start') else 'setpriv, prlimit and unshare'}")
    print(f"{'isolation':<20} {'start p50':>9} {'p95':>7} {'p99':>7} {'whole p50':>9} {'p95':>7} {'p99':>7} "
          f"{'CPU mean':>8}  ms")
    for isolated, name in ((False, "off (process group)"), (True, "namespace")):
        start, whole, cpu = results[isolated]
        print(f"{name:<20} {pct(start, 50) * 1000:>9.2f} {pct(start, 95) * 1000:>7.2f} {pct(start, 99) * 1000:>7.2f} "
              f"{pct(whole, 50) * 1000:>9.2f} {pct(whole, 95) * 1000:>7.2f} {pct(whole, 99) * 1000:>7.2f} "
              f"{sum(cpu) / len(cpu) * 1000:>8.2f}")
    (start, whole, cpu), (base_start, base_whole, base_cpu) = results[True], results[False]
    print(f"{'namespace - off':<20} {(pct(start, 50) - pct(base_start, 50)) * 1000:>+9.2f} "
          f"{(pct(start, 95) - pct(base_start, 95)) * 1000:>+7.2f} {'':>7} "
          f"{(pct(whole, 50) - pct(base_whole, 50)) * 1000:>+9.2f} {(pct(whole, 95) - pct(base_whole, 95)) * 1000:>+7.2f} "
          f"{'':>7} {(sum(cpu) / len(cpu) - sum(base_cpu) / len(base_cpu)) * 1000:>+8.2f}")


if __name__ == "__main__":
    main()
