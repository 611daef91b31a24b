"""Jobs as code: files of jobs, and the sections other apps add to them, planned, applied and
exported (``files.py``).

An app names the module of its sections here in its ``AppConfig.ready``; the module registers them
(``files.register``) when ``files.sections()`` first imports it. The sections check with the shared
schemas (``jobs.schemas``, ``notifications.schemas``: Django REST framework's serializers), which a
worker, beat or most commands never need: a process imports them when it first reads, plans or
exports a file, not at its start."""

SECTION_MODULES = []  # dotted names, in the order the apps added them
