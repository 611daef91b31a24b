"""``/metrics`` for Prometheus: the families computed at scrape time (``collector``) and the endpoint
that serves them to allowed addresses or a bearer token (``views``)."""
