"""gunicorn's settings, read from the working directory (the tests' web server, gunicorn started by hand in
the checkout): scheduler_site.gunicorn_conf's."""

from scheduler_site.gunicorn_conf import *  # noqa: F403
