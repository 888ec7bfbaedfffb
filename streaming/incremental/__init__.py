"""The scheduled job that keeps an MDS dataset up to date with a Delta table, appending or mirroring.

Engine-neutral: a Delta path is read with delta-rs (`streaming.delta`); Spark's own reader of a table lives in
`streaming.spark`, which builds on this package.
"""
