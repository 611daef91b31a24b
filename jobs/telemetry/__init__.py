"""What the processes tell the tools that watch them: traces (``tracing``) and the run a log line is
about (``logs``). A leaf: it imports nothing of the project, and nothing of OpenTelemetry until
traces are turned on."""
