"""What goes to the workers and what comes back: the ``jobs.execute_run`` messages, sent in batches
(``publishing.py``), and an attempt's kept output (``output.py``). Imports nothing of the project;
the worker's side is ``jobs.worker``."""
