"""The REST API under /api/: jobs, their runs, and the actions on them (run now, pause, cancel)."""
