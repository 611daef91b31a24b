"""The worker's side: the Celery task that runs one attempt, its heartbeats, and Celery's signal handlers."""
