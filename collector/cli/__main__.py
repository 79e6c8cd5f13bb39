"""`python -m mast_otel.collector.cli`: the `mast-otel` command."""

import sys

from mast_otel.collector.cli import main

sys.exit(main())
