"""The common start of the benchmark scripts: the repository on ``sys.path`` and Django set up with
the service's settings. Scripts run as ``python bench/<name>.py``, so this module is importable."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def setup(**env):
    """Set ``env`` (the script's own settings) in the environment, set up Django; the repository root."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.update(env)
    import django

    django.setup()
    return REPO
