"""What every benchmark measures with, in one place: the processes it starts (processes.py), the
readings it takes (readings.py), the database it fills and empties (database.py), the private
servers of the benchmarks that need the machine's PostgreSQL and broker to themselves (servers.py)
and the table it prints (table.py). Scripts run as ``python bench/<name>.py``, so ``bench/`` is on
``sys.path`` and this package is ``harness``."""
