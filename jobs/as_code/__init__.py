"""Jobs as code: files of jobs, and the sections other apps add to them, planned, applied and
exported (``files.py``)."""
