"""`python -m streaming`: the `mds-streaming` command line."""

from streaming.cli import main

raise SystemExit(main())
