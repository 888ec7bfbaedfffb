"""Conversion of tables into MDS datasets, whichever engine reads the rows.

One driver (`driver.run_conversion`) runs every conversion: destination check, NULL plan, task attempts,
conversion record, commit. Engines read the rows and run the attempts: Spark (`streaming.spark`, the only part
that imports pyspark) and pyarrow (`arrow_engine`, the command line's ``convert``). The rest is shared by both:

* `type_rules`: column type → MDS encoding, the one owner of the rules (Spark's table derives from it);
* `arrow_encoder`, `json_values`: Arrow record batches → MDS sample bytes, a column at a time;
* `null_plan`: which columns get NULL masks; `source`: where the rows came from;
* `attempt`, `upload_sink`: one task attempt writing its own folder, shards uploaded as they complete;
* `runs`: the names of run, attempt, partition and increment folders, and their parsers;
* `commit`: publishing a run (a commit of the commit log, or upstream's ``merge_index=False`` layout);
* `progress`: the driver's progress bar, read from the destination;
* `arrow_inputs`: the pyarrow engine's inputs (Parquet, Delta, JSON Lines, CSV, Hugging Face folders).

Nothing here imports pyspark or torch.
"""
