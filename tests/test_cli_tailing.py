"""jobsctl tail's follower: from successive looks at a run, exactly the text written since the last
look, also when the service kept only the tail of the output or a new attempt started."""

from jobsctl.tailing import Follower


def look(output, written, attempt=1):
    return {"output": output, "output_bytes": written, "attempt": attempt}


def test_it_prints_only_what_was_written_since_the_last_look():
    follower = Follower()
    assert follower.new_output(look("", 0)) == ""
    assert follower.new_output(look("one\n", 4)) == "one\n"
    assert follower.new_output(look("one\n", 4)) == ""
    assert follower.new_output(look("one\ntwo\n", 8)) == "two\n"
    assert follower.new_output(look("one\ntwo\nthré\n", 14)) == "thré\n"


def test_it_reads_the_kept_tail_when_earlier_bytes_were_dropped():
    follower = Follower()
    assert follower.new_output(look("abcdef", 6)) == "abcdef"
    kept = "[4 earlier bytes of 10 not kept; the last 6 follow]\nefghij"
    assert follower.new_output(look(kept, 10)) == "ghij"


def test_it_says_how_much_it_could_not_see():
    follower = Follower()
    follower.new_output(look("ab", 2))
    kept = "[96 earlier bytes of 100 not kept; the last 4 follow]\nwxyz"
    assert follower.new_output(look(kept, 100)) == "[94 bytes written meanwhile were not kept]\nwxyz"


def test_a_new_attempt_starts_afresh_under_a_heading():
    follower = Follower()
    assert follower.new_output(look("try one\n", 8, attempt=1)) == "try one\n"
    assert follower.new_output(look("", 0, attempt=2)) == "[attempt 2]\n"
    assert follower.new_output(look("try two\n", 8, attempt=2)) == "try two\n"


def test_without_a_byte_count_it_compares_the_texts():
    follower = Follower()
    assert follower.new_output({"output": "a\n", "attempt": 1}) == "a\n"
    assert follower.new_output({"output": "a\nb\n", "attempt": 1}) == "b\n"
