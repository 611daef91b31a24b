#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
    from scheduler_site import process

    process.harden()  # before anything is written (migrate makes the SQLite database) or read
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
