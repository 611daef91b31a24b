import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
application = get_wsgi_application()

# What is loaded by now (Django, the apps, their modules and URLs) lives as long as the process. Out
# of the collector's reach, its full passes walk only what requests leave behind: at 10,000,000 runs
# one jobs-list request in 16 took a full pass over it, 60-80 ms (docs/BENCHMARKS.md).
gc.freeze()
