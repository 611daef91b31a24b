"""The REST API for workflows and their runs."""
