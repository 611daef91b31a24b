"""The built-in pages for watching jobs and runs (server-rendered Django templates)."""
