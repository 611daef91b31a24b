"""Who may call the service: API tokens (``tokens``: made, listed, revoked, and checked on each request)."""
