"""Defining jobs: a job's fields, declared once (``fields.py``), its schedule object, saving, pause
and resume (``jobs.py``)."""
