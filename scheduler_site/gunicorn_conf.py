"""gunicorn's settings (``scheduler web`` passes them; the checkout's gunicorn.conf.py imports them): with
LOG_FORMAT=json gunicorn's own lines (its start, its workers, the access log) are JSON objects too, as
Django's are (settings.LOGGING). The master is hardened at once (scheduler_site.process):
its workers inherit it. (Not in scheduler_site.wsgi: whatever imports the application, a test
included, would be hardened too; another WSGI server calls process.harden() in its own start.)"""

import os

from scheduler_site import process

process.harden()

# gunicorn 25+ opens a control socket ($XDG_RUNTIME_DIR or ~/.gunicorn/gunicorn.ctl) through which
# any process of the service's user may stop the web or change its workers, at one path that every
# gunicorn of the user shares (the last one started takes it over). The service does not use it.
control_socket_disable = True

if os.environ.get("LOG_FORMAT", "").strip().lower() == "json":
    _handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"}
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "pythonjsonlogger.json.JsonFormatter",
                                "fmt": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s",
                                "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"}}},
        "handlers": {"console": _handler, "error_console": {**_handler, "stream": "ext://sys.stderr"}},
        "root": {"level": "INFO", "handlers": []},
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
    }
