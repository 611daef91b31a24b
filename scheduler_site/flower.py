"""``python -m scheduler_site.flower [flower options]``: Flower behind basic auth, or not at all.

Flower without credentials lets anyone read every task's arguments and shut workers down, and an
empty ``--basic-auth=`` is taken as a credential. So this refuses to start unless
``FLOWER_BASIC_AUTH`` holds ``user:password`` pairs (comma-separated) with a user and a password of
at least MIN_PASSWORD characters each. The credentials reach Flower through its environment
(Flower reads FLOWER_* variables), never its command line, which any local user can read in ps.
"""

import os
import sys

MIN_PASSWORD = 8
REFUSED_OPTIONS = ("--basic-auth", "--basic_auth", "--unauthenticated-api", "--unauthenticated_api", "--auth")


def credentials_problem(value):
    """Why ``value`` is not a usable FLOWER_BASIC_AUTH, or None."""
    if not value.strip():
        return "FLOWER_BASIC_AUTH is not set: Flower is not started without credentials (user:password)."
    for pair in value.split(","):
        user, colon, password = pair.strip().partition(":")
        if not colon or not user or len(password) < MIN_PASSWORD:
            return (f"FLOWER_BASIC_AUTH must be user:password pairs separated by commas, with a user name and a "
                    f"password of at least {MIN_PASSWORD} characters each.")
    return None


def main(argv):
    problem = credentials_problem(os.environ.get("FLOWER_BASIC_AUTH", ""))
    if problem is None and any(arg.split("=")[0] in REFUSED_OPTIONS for arg in argv):
        problem = "Give Flower's credentials in FLOWER_BASIC_AUTH, not as options (the command line is public)."
    if problem:
        print(f"flower: refusing to start. {problem}", file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWER_UNAUTHENTICATED_API", "FLOWER_AUTH")}
    os.execve(sys.executable, [sys.executable, "-m", "celery", "-A", "scheduler_site", "flower", *argv], env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
