"""The settings reference: every environment variable the settings module reads, with its type, its
default and its meaning.

The variables, their types and defaults are read from the source of ``scheduler_site/`` (each
``env_*("NAME", default)`` call and each ``os.environ`` read); their meanings come from
``docs/reference/settings.yml``, or, for a variable that file does not describe, from the guide pages
that name it. A variable with neither, or a meaning for a variable nothing reads, fails the build."""

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import yaml

from .markdown import cell

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "scheduler_site"
MEANINGS = REPO / "docs" / "reference" / "settings.yml"
GUIDES = REPO / "docs" / "guide"
# The typed readers of scheduler_site/env.py, and what each takes.
READERS = {
    "env_str": "text", "env_bool": "boolean", "env_int": "whole number", "env_float": "number",
    "env_list": "comma-separated list", "env_choice": "one of", "env_networks": "addresses or networks, comma-separated",
    "env_queues": "queues, comma-separated", "env_fernet_keys": "Fernet keys, comma-separated",
}


@dataclass
class Variable:
    name: str
    kind: str
    default: str  # Python source of the default, or "" when the reader has none
    minimum: str
    section: str
    source: str  # the file that reads it, relative to the repository


def _sections(text):
    """Line number -> title of each ``# --- Title`` comment, the settings module's section headings."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT and token.string.startswith("# ---"):
            title = token.string.removeprefix("# ---").strip().split(".")[0].split(":")[0]
            found[token.start[0]] = title.strip()
    return found


def _literal_names(node, assignments):
    """The variable names a reader's first argument stands for: a string, or a name assigned strings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in assignments:
        return [c.value for c in ast.walk(assignments[node.id]) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return []


def _environ_read(call):
    """The node naming the variable of ``os.environ.get(X)``, ``os.getenv(X)``, or None."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Attribute) \
            and func.value.attr == "environ" and call.args:
        return call.args[0]
    if isinstance(func, ast.Attribute) and func.attr == "getenv" and call.args:
        return call.args[0]
    return None


def read_variables():
    """Every environment variable read in ``scheduler_site/``, in the order of the source."""
    variables = {}
    # settings.py first: the other modules' variables join its sections.
    for path in sorted(SOURCES.glob("*.py"), key=lambda p: (p.name != "settings.py", p.name)):
        text = path.read_text()
        tree = ast.parse(text)
        sections = _sections(text)
        assignments = {t.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                       for t in node.targets if isinstance(t, ast.Name)}
        relative = str(path.relative_to(REPO))
        reads = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "environ" and isinstance(node.ctx, ast.Load):
                reads.append((node, "text", node.slice, None, None))
            elif isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else None
                if name in READERS and node.args:
                    default = node.args[1] if len(node.args) > 1 else None
                    minimum = node.args[2] if len(node.args) > 2 and name in ("env_int", "env_float") else None
                    kind = READERS[name]
                    if name == "env_choice" and len(node.args) > 2:
                        kind = "one of " + ", ".join(c.value for c in ast.walk(node.args[2]) if isinstance(c, ast.Constant))
                    reads.append((node, kind, node.args[0], default, minimum))
                elif (named := _environ_read(node)) is not None:
                    reads.append((node, "text", named, node.args[1] if len(node.args) > 1 else None, None))
        for node, kind, named, default, minimum in sorted(reads, key=lambda r: (r[0].lineno, r[0].col_offset)):
            section = next((sections[line] for line in sorted(sections, reverse=True) if line < node.lineno), "General")
            for name in _literal_names(named, assignments):
                if name in variables or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                    continue
                variables[name] = Variable(
                    name=name, kind=kind, section=section if path.name == "settings.py" else path.stem.capitalize(),
                    default=ast.get_source_segment(text, default) if default is not None else "",
                    minimum=ast.get_source_segment(text, minimum) if minimum is not None else "", source=relative)
    return list(variables.values())


def shown_default(source):
    """A default as a reader sees it: its value where the source is a constant expression, else the source."""
    if not source:
        return "—"
    try:
        value = eval(compile(source, "<default>", "eval"), {"__builtins__": {}}, {})  # constants only
    except Exception:
        return f"`{source}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple):
        return "`" + ",".join(map(str, value)) + "`" if value else "empty"
    if value == "":
        return "empty"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def meanings():
    return yaml.safe_load(MEANINGS.read_text()) or {}


def guides_naming(name):
    """The guide pages whose text names the variable, as (title, path relative to docs/)."""
    found = []
    for page in sorted(GUIDES.glob("*.md")) if GUIDES.is_dir() else []:
        text = page.read_text()
        if f"`{name}`" in text or f"`{name}=" in text:
            title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), page.stem)
            found.append((title, f"guide/{page.name}"))
    return found


def problems():
    """What keeps the reference from being complete: a variable with no meaning anywhere, a meaning of a
    variable nothing reads."""
    described = meanings()
    read = {v.name for v in read_variables()}
    found = [f"{name} is read by the settings but has no meaning in docs/reference/settings.yml nor a guide page"
             for name in sorted(read) if name not in described and not guides_naming(name)]
    found += [f"docs/reference/settings.yml describes {name}, which no setting reads"
              for name in sorted(set(described) - read)]
    return found



def markdown():
    """The page, ``reference/settings.md`` (its links are relative to ``docs/reference/``)."""
    described = meanings()
    lines = [
        "# Settings",
        "",
        "Every setting comes from the environment; a bad value stops the process at start with a message",
        "naming the variable. This page is generated from the settings module (`scheduler_site/settings.py`",
        "and the other modules of `scheduler_site/`) when the site is built: the variables, their types and",
        "their defaults are read from the code, so they cannot drift from it. A default shown as code is an",
        "expression of other settings.",
        "",
        "`NOTIFICATION_CHANNEL_KINDS` (the dotted paths of the notification channel kinds' packages) is a",
        "Django setting, not read from the environment; its default is in `notifications/channels/__init__.py`",
        "(see [Notifications](../guide/notifications.md#adding-a-channel-kind)).",
        "",
    ]
    sections = {}
    for variable in read_variables():
        sections.setdefault(variable.section, []).append(variable)
    for section, variables in sections.items():
        lines += [f"## {section}", "", "| variable | type | default | meaning |", "|---|---|---|---|"]
        lines += [_row(variable, described) for variable in variables]
        lines.append("")
    return "\n".join(lines) + "\n"


def _row(variable, described):
    meaning = described.get(variable.name)
    if meaning is None:
        meaning = "See " + ", ".join(f"[{title}](../{path})" for title, path in guides_naming(variable.name)) + "."
    kind = variable.kind + (f", at least `{variable.minimum}`" if variable.minimum else "")
    return f"| `{variable.name}` | {kind} | {cell(shown_default(variable.default))} | {cell(meaning)} |"
