"""The nemesis's checker on ledgers written by hand: what it must flag, and what it must not."""

from datetime import UTC, datetime

from tests.nemesis.checker import blame, duplicates, frozen_by, overlaps, read_ledger
from tests.nemesis.faults import Fault


def write(folder, host, *lines):
    (folder / f"ledger-{host}.txt").write_text("".join(f"{line}\n" for line in lines))


def test_the_ledger_pairs_each_start_with_its_end_per_host_and_keeps_killed_executions_open(tmp_path):
    write(tmp_path, "wa", "start 7 1 wa 1.0 100.0", "start 8 1 wa 1.5 100.5", "end 8 1 wa 2.0 101.0 ok",
          "start 9 1 wa 3.0 102.0", "end 9 1 wa 3.5 102.5 fail", "end 7 1")  # a line cut short: ignored
    write(tmp_path, "wb", "start 7 2 wb 5.0 104.0", "end 7 2 wb 6.0 105.0 ok")

    executions = read_ledger(tmp_path)

    assert [(e.run, e.attempt, e.host, e.start, e.end, e.outcome) for e in executions] == [
        (7, 1, "wa", 100.0, None, ""), (8, 1, "wa", 100.5, 101.0, "ok"), (9, 1, "wa", 102.0, 102.5, "fail"),
        (7, 2, "wb", 104.0, 105.0, "ok")]


def test_overlaps_are_between_different_runs_and_a_killed_execution_lasts_until_declared_over(tmp_path):
    write(tmp_path, "wa", "start 1 1 wa 0 100.0", "end 1 1 wa 0 102.0 ok",
          "start 2 1 wa 0 102.0", "end 2 1 wa 0 104.0 ok",  # back to back: no overlap
          "start 3 1 wa 0 105.0")  # killed: over when the service said so
    write(tmp_path, "wb", "start 4 1 wb 0 106.0", "end 4 1 wb 0 107.0 ok",
          "start 3 2 wb 0 108.0", "end 3 2 wb 0 109.0 ok")
    executions = read_ledger(tmp_path)
    declared = {(3, 1): datetime.fromtimestamp(107.5, tz=UTC)}

    found, frozen = overlaps(executions, declared)

    assert found == ["run 3#1@wa and run 4#1@wb overlap 1.0 s"]  # 3#1 and 3#2: the same run, not an overlap
    assert frozen == []
    assert overlaps([e for e in executions if e.run != 4], declared) == ([], [])


def test_a_run_executed_again_is_a_duplicate_blamed_on_the_fault_on_its_host_and_a_retry_is_not(tmp_path):
    write(tmp_path, "wa", "start 1 1 wa 0 100.0",  # killed with its worker
          "start 2 1 wa 0 100.0", "end 2 1 wa 0 101.0 fail",  # failed on purpose: its retry is no duplicate
          "start 2 2 wa 0 103.0", "end 2 2 wa 0 104.0 ok",
          "start 5 1 wa 0 200.0", "end 5 1 wa 0 201.0 ok")  # done, yet done again: nothing explains it
    write(tmp_path, "wb", "start 1 2 wb 0 106.0", "end 1 2 wb 0 107.0 ok", "start 5 2 wb 0 205.0",
          "end 5 2 wb 0 206.0 ok")
    by_run = {}
    for execution in read_ledger(tmp_path):
        by_run.setdefault(execution.run, []).append(execution)
    kill = Fault(1, "worker-parent-kill", "wa", started=100.5, ended=102.6)
    elsewhere = Fault(2, "worker-partition", "wb", started=199.0, ended=203.0)

    found = duplicates(by_run, [kill, elsewhere])

    assert [(e.run, e.attempt, fault and fault.number) for e, fault in found] == [(1, 1, 1), (5, 1, None)]
    assert blame(by_run[5][0], [Fault(3, "postgres-restart", "postgres", 200.2, 200.8)]) is None


def test_the_ledger_is_read_on_the_kernels_uptime_so_a_host_with_a_skewed_clock_is_placed_right(tmp_path):
    # wb's clock runs 120 s ahead: its wall stamps are off, its uptime stamps (the kernel's) are not.
    write(tmp_path, "wa", "start 1 1 wa 50.00 1000.0", "end 1 1 wa 52.00 1002.0 ok")
    write(tmp_path, "wb", "start 2 1 wb 51.00 1121.0", "end 2 1 wb 53.00 1123.0 ok")

    on_wall = {e.run: (e.start, e.end) for e in read_ledger(tmp_path)}
    on_uptime = {e.run: (e.start, e.end) for e in read_ledger(tmp_path, boot=950.0)}

    assert on_wall == {1: (1000.0, 1002.0), 2: (1121.0, 1123.0)}
    assert on_uptime == {1: (1000.0, 1002.0), 2: (1001.0, 1003.0)}
    assert overlaps(read_ledger(tmp_path, boot=950.0), {}) == (["run 1#1@wa and run 2#1@wb overlap 1.0 s"], [])


def test_a_duplicate_during_a_harmless_fault_is_unexplained_unless_the_fault_had_to_kill(tmp_path):
    write(tmp_path, "wa", "start 1 1 wa 0 100.0", "start 1 2 wa 0 106.0", "end 1 2 wa 0 107.0 ok")
    first = read_ledger(tmp_path)[0]

    assert blame(first, [Fault(1, "clock-skew", "wa", started=99.0, ended=110.0)]) is None
    assert blame(first, [Fault(1, "disk-full", "wa", started=99.0, ended=110.0)]) is None
    killed = Fault(1, "clock-skew", "wa", started=99.0, ended=110.0, killed=True)
    assert blame(first, [killed]) is killed


def test_an_execution_frozen_mid_run_and_declared_lost_overlaps_the_next_run_only_as_a_zombie(tmp_path):
    # As seed 38041 on RabbitMQ found it: run 1's pool process (pid 33) stopped 1 s into its 2.5 s for
    # 13.5 s; declared lost at 105.0 and run again; run 2 began at 114.3 (another process of wa);
    # run 1 went on when continued at 115.6 and wrote its end at 116.4.
    write(tmp_path, "wa", "start 1 1 wa 0 101.0", "end 1 1 wa 0 116.4 ok",
          "start 2 1 wa 0 114.3", "end 2 1 wa 0 116.8 ok")
    executions = read_ledger(tmp_path)
    declared = {(1, 1): datetime.fromtimestamp(105.0, tz=UTC)}
    stop = Fault(1, "worker-child-stop", "wa", started=102.1, ended=115.6, pid=33)

    found, frozen = overlaps(executions, declared, frozen_by([stop], {(1, 1): 33, (2, 1): 34}))

    assert found == []
    assert frozen == ["run 1#1@wa and run 2#1@wa overlap 2.1 s: run 1#1 frozen by fault 1 and declared over "
                      "before the other began; it went on 0.8 s after its process was continued"]
    # Not frozen: another process was stopped; or not yet declared over when run 2 began.
    plain = "run 1#1@wa and run 2#1@wa overlap 2.1 s"
    assert overlaps(executions, declared, frozen_by([stop], {(1, 1): 35})) == ([plain], [])
    late = {(1, 1): datetime.fromtimestamp(114.5, tz=UTC)}
    assert overlaps(executions, late, frozen_by([stop], {(1, 1): 33})) == ([plain], [])
