"""Delta Lake tables without Spark, in three seams after delta-kernel's: `snapshot` (a version pinned with its
metadata, protocol, schema and data files), `scan` (the one reader of its data files, a file at a time) and
`changes_between` (what the versions between two snapshots changed: the window, its feed, its files). A snapshot
is built from one read of the log (`log_replay`), which the changes between it and an older version reuse.

Engine-neutral and below every user of a Delta table: the command line's conversion of a Delta path, the
scheduled incremental job (`streaming.incremental`) and Spark's reader of a path without Delta support all read
Delta tables here. Every error the package raises is in `errors`.
"""
