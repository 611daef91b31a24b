"""What a benchmark prints: lines as they come, and its table in markdown (docs/BENCHMARKS.md's
format, which bench/compare.py parses), with the ratio to the baseline measured in the same run."""


def say(*parts):
    print(*parts, flush=True)


def markdown(header, rows, align):
    """Print a markdown table: ``header`` the column names, ``rows`` lists of cells (text), ``align``
    one letter a column, ``l`` or ``r``."""
    say("| " + " | ".join(header) + " |")
    say("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")
    for row in rows:
        say("| " + " | ".join(str(cell) for cell in row) + " |")


def ratio(ours, baseline, form="{:.2f}"):
    """``ours`` ÷ ``baseline`` as text, ``-`` when either is missing or the baseline is 0."""
    return form.format(ours / baseline) if baseline and ours is not None else "-"
