# Databricks notebook source
# MAGIC %md
# MAGIC # 1 · Convert a table or DataFrame to MDS in a Unity Catalog volume
# MAGIC
# MAGIC Writes MDS shards with `dataframe_to_mds(df, out="/Volumes/<catalog>/<schema>/<volume>/<dataset>")`, one
# MAGIC Spark task per partition, and publishes `index.json` last, so a failed run leaves the volume as it was.
# MAGIC Then reads the dataset back with `StreamingDataset`.
# MAGIC
# MAGIC **Widgets**
# MAGIC * `source_table`: a table name (`catalog.schema.table`) or Delta path; empty = a generated demo DataFrame
# MAGIC   of `rows` rows (`id`, `features`: 8 floats, `label`: 0/1). From a Delta table the converted version is
# MAGIC   recorded in `mds_conversion.json`, and `03_incremental_job` continues from it.
# MAGIC * `out`: the dataset folder. The default is `/Volumes/main/default/mds_demo/demo` on Databricks and a
# MAGIC   temporary folder elsewhere. Create the volume first: `CREATE VOLUME IF NOT EXISTS main.default.mds_demo`.
# MAGIC * `mode`: `overwrite` replaces the dataset, `append` adds to it, `error` refuses a non-empty folder.

# COMMAND ----------

# What to install (mds-streaming is not on PyPI yet): the wheel `make dist` builds into dist/, copied to a volume
# (default), another wheel or a Git URL (`git+https://<host>/<org>/<repo>.git@<tag>`).
dbutils.widgets.text(
    "install", "/Volumes/main/default/mds_demo/mds_streaming-0.2.0-py3-none-any.whl", "pip requirement of mds-streaming"
)
install = dbutils.widgets.get("install")

# COMMAND ----------

# MAGIC %pip install $install

# COMMAND ----------

dbutils.library.restartPython()

# COMMAND ----------

import importlib.util
import json
import os
import tempfile

import streaming

if importlib.util.find_spec("streaming.spark") is None:
    raise ImportError(
        f"`streaming` at {streaming.__file__} is MosaicML Streaming, not mds-streaming: run the %pip "
        f"cell above (it shadows the copy Databricks Runtime ML ships) and restart Python."
    )
print(f"mds-streaming {streaming.__mds_version__} from {os.path.dirname(streaming.__file__)}")

# COMMAND ----------


# On Databricks, not in a local run that stands in for one (run_local.py sets RUN_LOCAL_ACCESS_MODE): such a run has
# no Unity Catalog, so its demo data stays in a local folder.
ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ and "RUN_LOCAL_ACCESS_MODE" not in os.environ


def default_location(name: str) -> str:
    """A dataset folder in the demo volume on Databricks, in a temporary folder anywhere else."""
    if ON_DATABRICKS:
        return f"/Volumes/main/default/mds_demo/{name}"
    return os.path.join(tempfile.gettempdir(), "mds_demo", name)


dbutils.widgets.text("source_table", "", "Table or Delta path (empty: demo data)")
dbutils.widgets.text("rows", "20000", "Rows of demo data")
dbutils.widgets.text("out", default_location("demo"), "MDS dataset folder")
dbutils.widgets.dropdown("mode", "overwrite", ["overwrite", "append", "error"], "If the dataset exists")
dbutils.widgets.text("compression", "zstd", "Shard compression (empty: none)")
dbutils.widgets.text("size_limit", "64mb", "Shard size limit")

source_table = dbutils.widgets.get("source_table").strip()
rows = int(dbutils.widgets.get("rows"))
out = dbutils.widgets.get("out").strip()
mode = dbutils.widgets.get("mode")
compression = dbutils.widgets.get("compression").strip() or None
size_limit = dbutils.widgets.get("size_limit").strip()

# COMMAND ----------

# MAGIC %md
# MAGIC ## The input
# MAGIC A table is passed by name, so the conversion reads one pinned Delta version and records it. The demo data
# MAGIC is a DataFrame whose label is whether the features sum to more than zero, so a small model can learn it.

# COMMAND ----------

if source_table:
    data = source_table
    print(f"converting {source_table}")
else:
    data = (
        spark.range(rows, numPartitions=4)
        .selectExpr(
            "id",
            "transform(sequence(1, 8), k -> CAST(sin(id * k + k) AS FLOAT)) AS features",
        )
        .selectExpr("id", "features", "CAST(aggregate(features, 0D, (acc, x) -> acc + x) > 0 AS INT) AS label")
    )
    display(data.limit(5))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Check access
# MAGIC Reach the volume from the driver first: missing credentials or privileges then fail here, in seconds, with
# MAGIC what to set, rather than in every Spark task.

# COMMAND ----------

from streaming.storage import join_url, storage_for

exists = storage_for(out).exists(join_url(out, "index.json"))
print(f"{out}: {'a dataset is there' if exists else 'no dataset yet'}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Convert
# MAGIC Each task writes its partition's shards straight into the volume (through the FUSE mount on a cluster,
# MAGIC through the Files API elsewhere); the driver then publishes the merged `index.json`.

# COMMAND ----------

from streaming.spark import dataframe_to_mds

result = dataframe_to_mds(data, out, mode=mode, compression=compression, size_limit=size_limit)
print(f"{result.samples} rows in {result.shards} shards ({result.bytes:,} bytes) written to {result.path}")
print(f"columns: {result.columns}; table version: {result.table_version}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Read it back
# MAGIC `StreamingDataset` copies shards from the volume into a local cache as it reads them.

# COMMAND ----------

from streaming import StreamingDataset

with tempfile.TemporaryDirectory(prefix="mds-cache-") as cache:
    dataset = StreamingDataset(remote=out, local=cache)
    dataset_samples = len(dataset)
    print(f"{dataset_samples} samples; the first: {dataset[0]}")
if mode != "append" and dataset_samples != result.samples:
    raise AssertionError(f"read back {dataset_samples} samples, but the conversion wrote {result.samples}")

# COMMAND ----------

dbutils.notebook.exit(
    json.dumps(
        {
            "out": result.path,
            "samples": result.samples,
            "shards": result.shards,
            "table_version": result.table_version,
            "dataset_samples": dataset_samples,
        }
    )
)
