"""jobs.lifecycle.arrays: a column written as one array literal reads back in PostgreSQL as the
values themselves, whatever the strings hold."""

import json
import math
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from django.db import connection

from jobs.lifecycle import arrays

pytestmark = pytest.mark.postgres("PostgreSQL's array input")

HOSTILE = ["", " ", "NULL", "null", "a,b", "{x}", '"', "\\", '\\"', "'; DROP TABLE jobs_job; --", "tab\there",
           "line\nbreak", "ünïcødé ✓", "$1", "%s", "%(x)s", "x" * 100_000]


def read_back(values, kind):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT x FROM unnest(%s::{kind}[]) WITH ORDINALITY AS u(x, n) ORDER BY n",
                       [arrays.literal(values)])
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db
def test_strings_come_back_as_they_were():
    assert read_back(HOSTILE + [None], "text") == HOSTILE + [None]


@pytest.mark.django_db
def test_json_text_comes_back_as_its_json():
    documents = [{"output": value, "n": n} for n, value in enumerate(HOSTILE)] + [[1, "two", None], "just text"]
    back = read_back([json.dumps(d) for d in documents] + [None], "jsonb")
    assert [json.loads(b) if isinstance(b, str) else b for b in back] == documents + [None]


@pytest.mark.django_db
def test_numbers_times_and_days_come_back_as_they_were():
    assert read_back([0, -1, 2**62, None, True + 1], "bigint") == [0, -1, 2**62, None, 2]
    floats = read_back([0.1, -2.5e-7, 1e300, math.inf, -math.inf, None], "float8")
    assert floats == [0.1, -2.5e-7, 1e300, math.inf, -math.inf, None]
    assert math.isnan(read_back([math.nan], "float8")[0])
    moments = [datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC),
               datetime(2026, 3, 29, 2, 30, tzinfo=timezone(timedelta(hours=5, minutes=45))), None]
    assert read_back(moments, "timestamptz") == moments
    assert read_back([date(2026, 2, 28), None], "date") == [date(2026, 2, 28), None]
    assert read_back([True, False, None], "boolean") == [True, False, None]


def test_a_value_of_another_type_is_refused():
    with pytest.raises(TypeError, match="dict has no PostgreSQL array form"):
        arrays.literal([{"a": 1}])
