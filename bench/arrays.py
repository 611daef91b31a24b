"""A bulk statement's column: psycopg's adaptation of a Python list, element by element, against one
array literal written by jobs.lifecycle.arrays (issue 46 point 2). Client CPU per statement of
``SELECT count(*) FROM unnest(%s::type[])``, for Django's client-side cursor and for a server-side
one binding in binary.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/arrays.py --elements 10000
"""

import argparse
import json
import os
import time
from datetime import UTC, datetime, timedelta

import benchenv
import psycopg

benchenv.setup()

from jobs.lifecycle import arrays  # noqa: E402


def cpu_ms(statement, repeat):
    statement()
    started = time.process_time()
    for _ in range(repeat):
        statement()
    return (time.process_time() - started) / repeat * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    n, now = args.elements, datetime.now(UTC)
    columns = {
        "bigint": list(range(10**6, 10**6 + n)),
        "timestamptz": [now + timedelta(seconds=i) for i in range(n)],
        "jsonb": [json.dumps({"output": 'x"y\\z', "n": i}) for i in range(n)],
        "float8": [i * 0.001 for i in range(n)],
    }
    client = psycopg.connect(url, cursor_factory=psycopg.ClientCursor)
    server = psycopg.connect(url)
    print(f"client CPU per statement, ms, {n:,} elements, mean of {args.repeat}")
    print(f"| {'elements':<12} | {'list, client-side':>18} | {'list, server binary':>20} | {'literal':>8} |")
    print(f"|{'-' * 14}|{'-' * 20}:|{'-' * 21}:|{'-' * 9}:|")
    for kind, values in columns.items():
        listed, binary, literal = measure(client, server, f"SELECT count(*) FROM unnest(%s::{kind}[])", values,
                                          args.repeat)
        print(f"| {kind:<12} | {listed:>18.2f} | {binary:>20.2f} | {literal:>8.2f} |")


def measure(client, server, sql, values, repeat):
    """Client CPU ms of ``sql`` given ``values`` three ways: as a list (client-side binding; server-side
    in binary) and as one literal."""
    with client.cursor() as c, psycopg.Cursor(server) as s:
        listed = cpu_ms(lambda: c.execute(sql, [values]), repeat)
        binary = cpu_ms(lambda: s.execute(sql, [values], binary=True), repeat)
        literal = cpu_ms(lambda: c.execute(sql, [arrays.literal(values)]), repeat)
        c.execute(sql, [arrays.literal(values)])
        assert c.fetchone()[0] == len(values)
    return listed, binary, literal

if __name__ == "__main__":
    main()
