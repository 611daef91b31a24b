#!/usr/bin/env python
import sys

if __name__ == "__main__":
    from scheduler_site.cli import manage

    sys.exit(manage(sys.argv[1:], prog=sys.argv[0]))
