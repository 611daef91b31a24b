"""jobsctl: the job scheduler's command line, talking to its REST API with a token."""

__version__ = "1.0.0"
