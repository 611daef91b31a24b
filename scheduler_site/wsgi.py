import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
django_application = get_wsgi_application()

from jobs.api.pings import lane  # noqa: E402  (after the apps are loaded)

# Check-in pings are answered before Django's request path (jobs.api.pings): the rate of a crontab
# fleet's pings is the web's largest.
application = lane(django_application)

# What is loaded by now (Django, the apps, their modules and URLs) lives as long as the process. Out
# of the collector's reach, its full passes walk only what requests leave behind: at 10,000,000 runs
# one jobs-list request in 16 took a full pass over it, 60-80 ms (docs/BENCHMARKS.md).
gc.freeze()
