"""``python -m scheduler_site.flower [flower options]``: Flower behind basic auth, or not at all.

Flower without credentials lets anyone read every task's arguments and shut workers down, and an
empty ``--basic-auth=`` is taken as a credential. So this refuses to start unless
``FLOWER_BASIC_AUTH`` holds ``user:password`` pairs (comma-separated), each password passing the
site's AUTH_PASSWORD_VALIDATORS for its user. The credentials reach Flower through its environment
(Flower reads FLOWER_* variables), never its command line, which any local user can read in ps.

Flower's options are Tornado's: ``-auth=x`` and ``--unauthenticated_api`` are the same options as
``--auth=x`` and ``--unauthenticated-api``, so options are compared without dashes or case. Flower
also runs a ``flowerconfig.py`` from the working directory, which may set any option (or run any
code): one there stops the start, and Flower is given an empty configuration file instead.
"""

import os
import sys

REFUSED_OPTIONS = {"basic_auth", "unauthenticated_api", "auth", "auth_provider", "oauth2_key", "oauth2_secret",
                   "oauth2_redirect_uri", "conf"}
# Celery's command, undumpable with the service's umask (scheduler_site.process) from its start: an
# exec makes a process dumpable again.
HARDENED_CELERY = ("import sys; from scheduler_site import process; process.harden(); "
                   "from celery.__main__ import main; sys.argv[0] = 'celery'; main()")
DEFAULT_CONFIG_FILE = "flowerconfig.py"  # flower.options.DEFAULT_CONFIG_FILE, read from the working directory


def option_name(arg):
    """The Tornado option an argument sets ("--basic-auth=x", "-basic_auth" are "basic_auth"), or None."""
    if not arg.startswith("-"):
        return None
    return arg.lstrip("-").partition("=")[0].replace("-", "_").lower()


def password_problems(user, password):
    """What the site's password validators find wrong with ``password`` for ``user`` (empty: none)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    try:
        validate_password(password, user=get_user_model()(username=user))
    except ValidationError as error:
        return error.messages
    return []


def credentials_problem(value):
    """Why ``value`` is not a usable FLOWER_BASIC_AUTH, or None."""
    if not value.strip():
        return "FLOWER_BASIC_AUTH is not set: Flower is not started without credentials (user:password)."
    for pair in value.split(","):
        user, colon, password = pair.strip().partition(":")
        if not colon or not user.strip() or not password:
            return "FLOWER_BASIC_AUTH must be user:password pairs separated by commas, with a user name and a password."
        problems = password_problems(user.strip(), password)
        if problems:
            return f"FLOWER_BASIC_AUTH: the password of {user.strip()!r} is too weak: {' '.join(problems)}"
    return None


def main(argv):
    problem = credentials_problem(os.environ.get("FLOWER_BASIC_AUTH", ""))
    refused = sorted({option_name(arg) for arg in argv} & REFUSED_OPTIONS)
    if problem is None and refused:
        problem = (f"Give Flower's credentials in FLOWER_BASIC_AUTH, not as options (the command line is public); "
                   f"its authentication and configuration file are this guard's ({', '.join(refused)}).")
    if problem is None and os.path.exists(DEFAULT_CONFIG_FILE):
        problem = (f"{os.path.abspath(DEFAULT_CONFIG_FILE)} exists: Flower would run it and it may change its "
                   "authentication. Remove it and give Flower's options on its command line.")
    if problem:
        print(f"flower: refusing to start. {problem}", file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("FLOWER_") and k[len("FLOWER_"):].lower() in REFUSED_OPTIONS - {"basic_auth"})}
    if os.environ.get("LOG_FORMAT", "").strip().lower() == "json":
        argv = [*argv, "--logging=none"]  # Tornado's handlers off: scheduler_site.celery logs through settings.LOGGING
    os.execve(sys.executable, [sys.executable, "-c", HARDENED_CELERY, "-A", "scheduler_site", "flower",
                               f"--conf={os.devnull}", *argv], env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
