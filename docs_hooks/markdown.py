"""Small helpers for writing Markdown tables."""


def cell(text):
    """Text for a table cell: one line, its pipes escaped outside code spans (inside them they are text)."""
    parts = " ".join(str(text).split()).split("`")
    return "`".join(part if index % 2 else part.replace("|", "\\|") for index, part in enumerate(parts))
