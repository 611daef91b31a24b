"""Jobs from elsewhere: ``manage.py jobs import celery-beat | crontab FILE | cronjob FILE``.

Each importer reads its source into an ``Import``: the entries of a jobs file (the shapes ``jobs
apply`` takes: ``jobs:``, and ``channels:`` and ``rules:`` for a crontab's MAILTO) and a report,
row by row, of what carried over and what could not. ``apply`` plans and saves the entries through
the jobs files' own path (``files.plan_file``, ``files.apply_plan``), so the checks, permissions,
quotas and audit entries are those of ``jobs apply``.

Each source row becomes a job of a stable name; a job of that name that exists already is left as
it is (a person may have tuned it since), so running an import again changes nothing.
"""

from dataclasses import dataclass, field

from django.db import transaction

from ...models import Job
from .. import files


@dataclass
class Row:
    """What became of one row of the source (a periodic task, a crontab line, a CronJob)."""

    source: str
    job: str | None = None
    carried: list = field(default_factory=list)
    lost: list = field(default_factory=list)
    refused: str = ""  # why nothing of the row carried over
    existing: bool = False  # its job exists already and is left as it is

    def lines(self):
        if self.refused:
            return [f"{self.source}: not carried over: {self.refused}"]
        head = f"{self.source} -> job {self.job}"
        if self.existing:
            head, carried = f"{head}: a job of this name exists already; left as it is.", []
        else:
            carried = [f"    carried over: {text}" for text in self.carried]
        return [head, *carried, *(f"    not carried over: {text}" for text in self.lost)]


@dataclass
class Import:
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # what holds for the whole source
    sections: dict = field(default_factory=lambda: {"jobs": []})  # key: [(entry's data, its line)]
    errors: list = field(default_factory=list)  # bad input: the import writes nothing

    def add(self, key, data, line=None):
        self.sections.setdefault(key, []).append((data, line))

    def report(self):
        return [*self.notes, *(line for row in self.rows for line in row.lines())]

    def keep_existing(self):
        """Leave out the jobs that exist already (and the rules about them): their rows say so."""
        names = [data["name"] for data, _ in self.sections["jobs"]]
        taken = set()
        for start in range(0, len(names), 10000):
            taken.update(Job.objects.filter(name__in=names[start : start + 10000]).values_list("name", flat=True))
        for row in self.rows:
            row.existing = row.job in taken and not row.refused
        self.sections["jobs"] = [(data, line) for data, line in self.sections["jobs"] if data["name"] not in taken]
        if "rules" in self.sections:
            self.sections["rules"] = [
                (data, line) for data, line in self.sections["rules"] if data.get("job") not in taken
            ]
        return taken

    def entries(self, team=None):
        """The entries as ``files.plan_file`` takes them; ``line`` is the source's, for its errors. With
        ``team`` (a group's name) every job is that team's too."""
        shared = {"jobs": {"group": team}} if team else {}
        return {
            key: [
                files.Entry(key, index, {**data, **shared.get(key, {})}, line)
                for index, (data, line) in enumerate(items)
            ]
            for key, items in self.sections.items()
            if items or key == "jobs"
        }


def check(imported):
    if imported.errors:
        raise files.JobFileError(imported.errors)


def apply(imported, actor, dry_run=False, then=None, team=None):
    """Plan the import and save it in one transaction with ``then()`` (what else the import does,
    such as disabling the originals): all of it or none. A dry run does it all and rolls back.
    ``team`` shares every job with that group, as a file's ``group`` does. Raises
    ``files.JobFileError`` naming every entry refused. Returns the plan."""
    check(imported)
    plan = files.plan_file(imported.entries(team), actor)
    with transaction.atomic():
        if not plan.is_empty:
            files.apply_plan(plan, actor)
        if then is not None:
            then()
        if dry_run:
            transaction.set_rollback(True)
    return plan


def existing_channels(actor):
    """The names of the channels there are (empty when no app adds a ``channels:`` section)."""
    section = files.sections().get("channels")
    return {entry["name"] for entry in section.export(actor)} if section else set()


def has_channels():
    return "channels" in files.sections() and "rules" in files.sections()


MAX_FILE_BYTES = 1_000_000  # far more than any crontab or manifest; a bigger file is refused unread


def read_text(path, stdin):
    """The text of ``path`` (``-``: ``stdin``), refused past MAX_FILE_BYTES."""
    try:
        if path == "-":
            text = stdin.read(MAX_FILE_BYTES + 1)
        else:
            with open(path, encoding="utf-8") as source:
                text = source.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise files.JobFileError([f"Cannot read {path}: {exc.strerror}."]) from None
    except UnicodeDecodeError:
        raise files.JobFileError([f"{path} is not UTF-8 text."]) from None
    if len(text) > MAX_FILE_BYTES:
        raise files.JobFileError([f"{path} is larger than {MAX_FILE_BYTES:,} characters: split it."])
    return text
