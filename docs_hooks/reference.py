"""The MkDocs hook (mkdocs.yml, ``hooks:``) that adds the generated reference pages to the site: the API
from the OpenAPI schema, the settings from the settings module, the command lines from their help.
They exist only in the build, never as files, so they cannot be edited by hand or go stale."""

import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

# MkDocs loads this file with its own folder's parent on the path (only while loading it): the
# generators are imported now, and read the code they describe in a process of their own.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
try:
    from docs_hooks import api_reference, cli_reference, from_django, settings_reference
finally:
    sys.path.pop(0)

PAGES = {
    "reference/api.md": api_reference.markdown,
    "reference/settings.md": settings_reference.markdown,
    "reference/cli.md": cli_reference.markdown,
}


def on_files(files, config):
    problems = settings_reference.problems()
    if problems:
        raise PluginError("The settings reference is incomplete:\n  " + "\n  ".join(problems))
    from_django.gathered.cache_clear()  # `mkdocs serve` rebuilds: read the code as it is now
    try:
        for path, make in PAGES.items():
            files.append(File.generated(config, path, content=make()))
    except from_django.Failed as exc:
        raise PluginError(str(exc)) from None
    return files
