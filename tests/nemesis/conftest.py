"""The nemesis (test_nemesis.py) runs only when asked for by its path (``pytest tests/nemesis``): it takes minutes, and
the passes of scripts/test.sh that run "everything but the chaos tests" must not pick it up. It
starts processes, so the SQLite pass leaves it out as well."""

from pathlib import Path

from django.conf import settings

HERE = Path(__file__).resolve().parent


def _named(config):
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config, items):
    sqlite = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    mine = [item for item in items if Path(item.path) == HERE / "test_nemesis.py"]
    if mine and (sqlite or not _named(config)):
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]
