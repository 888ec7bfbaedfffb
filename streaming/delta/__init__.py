"""Delta Lake tables without Spark: the log (history windows, checkpoints, row ids, deletion vectors) and delta-rs.

Engine-neutral and below every user of a Delta table: the command line's conversion of a Delta path, the
scheduled incremental job (`streaming.incremental`) and Spark's reader of a path all read Delta tables here.
"""
