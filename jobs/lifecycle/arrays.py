"""A bulk statement's column as one PostgreSQL array literal (``'{1,2,3}'``, cast by the statement:
``unnest(%s::bigint[], ...)``), sent as a single text parameter.

psycopg adapts a Python list element by element, and for text and times that was the dearest part of
the scheduler's and the worker's bulk statements: per element 18 µs for JSON text, 8 µs for a
timestamp, 1 µs for an integer, where the literal costs 0.8, 2.6 and 0.25 µs (docs/BENCHMARKS.md).
"""

from datetime import date


def literal(values):
    """``values`` (None, bool, int, float, str, datetime, date) as the text of a PostgreSQL array
    of one dimension: every string double-quoted, its backslashes and double quotes escaped; NULL for
    None. A value of another type is refused (TypeError): the caller writes it as one of these."""
    return "{" + ",".join(map(_element, values)) + "}"


def _element(value):
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)  # PostgreSQL reads inf, -inf and nan as Python writes them
    if isinstance(value, date):  # a datetime too: ISO 8601, with its offset when it has one
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no PostgreSQL array form here")


def columns(params):
    """A statement's named parameters with each list written as an array literal."""
    return {name: literal(value) if isinstance(value, list) else value for name, value in params.items()}
