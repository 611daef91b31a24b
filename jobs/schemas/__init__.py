"""The shapes the API and jobs-as-code files both check with, below both (one schema, one set of
messages): a job's (``jobs.py``), a limit's (``limits.py``) and what a user owns and shares with a
team (``owned.py``). They import nothing of an interface."""
