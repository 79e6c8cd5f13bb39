"""`python -m collector.cli`: the `mast-otel` command."""

import sys

from collector.cli import main

sys.exit(main())
