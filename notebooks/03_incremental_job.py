# Databricks notebook source
# MAGIC %md
# MAGIC # 3 · Scheduled job: bring an MDS dataset up to the newest version of a Delta table
# MAGIC
# MAGIC Each run brings the dataset from the table version it holds to the newest one: it appends the rows the new
# MAGIC version has that the old one did not, into its own folder of the dataset, and records the new version in one
# MAGIC commit of the dataset's log. Readers see all of a run's rows or none. So:
# MAGIC
# MAGIC * a run at the table version the dataset already holds changes nothing;
# MAGIC * a run that fails (or a cluster that dies) leaves the dataset as it was, and the next run redoes the work;
# MAGIC * an updated row's new value is appended and its old value stays; deleted rows stay (the run counts them);
# MAGIC   an overwrite or `CREATE OR REPLACE TABLE … AS SELECT` appends only the rows that are new; `OPTIMIZE`,
# MAGIC   Z-ordering and predictive optimization change nothing and cost nothing;
# MAGIC * every nullable column is stored with a NULL mask from the first run, so a NULL arriving later never stops it.
# MAGIC
# MAGIC The change is read from the table's Change Data Feed when it was on for every version since the last run,
# MAGIC otherwise from the data files those versions added and removed: either way a run reads what changed, not the
# MAGIC table. If `VACUUM` removed files the change needs, the run stops naming the version; run it once with
# MAGIC `resync` = `true` to append what the dataset is missing, compared with its own rows.
# MAGIC
# MAGIC **Schedule it** with the bundle in `bundle/` (`databricks bundle deploy`: a classic job cluster, or
# MAGIC serverless), or in the UI: *Jobs & Pipelines → Create job*, task type *Notebook*, this notebook, parameters
# MAGIC `table` and `out`, a *Table update* trigger on the table (or a schedule), and *Maximum concurrent runs* = 1.
# MAGIC
# MAGIC **Widgets**: `table` (name or Delta path; the default demo table is created with 100 events when it is
# MAGIC missing), `out` (the dataset folder in a volume), `version` (empty: the latest), `change_data_feed` (`auto`
# MAGIC uses it whenever it was on throughout), `resync` (`true` once, after a vacuumed history stopped the job).

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

CDF_CHOICES = {"auto": None, "on": True, "off": False}


# On Databricks, not in a local run that stands in for one (run_local.py sets RUN_LOCAL_ACCESS_MODE): such a run has
# no Unity Catalog, so its demo data stays in a local folder.
ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ and "RUN_LOCAL_ACCESS_MODE" not in os.environ


def default_location(name: str) -> str:
    """A dataset folder in the demo volume on Databricks, in a temporary folder anywhere else."""
    if ON_DATABRICKS:
        return f"/Volumes/main/default/mds_demo/{name}"
    return os.path.join(tempfile.gettempdir(), "mds_demo", name)


DEMO_TABLE = (
    "main.default.mds_demo_events" if ON_DATABRICKS else os.path.join(tempfile.gettempdir(), "mds_demo", "events_table")
)

dbutils.widgets.text("table", DEMO_TABLE, "Delta table (name or path)")
dbutils.widgets.text("out", default_location("events"), "MDS dataset folder")
dbutils.widgets.text("version", "", "Table version (empty: latest)")
dbutils.widgets.dropdown("change_data_feed", "auto", list(CDF_CHOICES), "Use the Change Data Feed")
dbutils.widgets.text("compression", "zstd", "Shard compression (empty: none)")
dbutils.widgets.dropdown("resync", "false", ["false", "true"], "Resync (after a vacuumed history)")
dbutils.widgets.dropdown("mode", "append", ["append", "mirror"], "append: keep every row; mirror: the table's rows")
dbutils.widgets.text("key", "", "Key columns, comma-separated (mode mirror)")

table = dbutils.widgets.get("table").strip()
out = dbutils.widgets.get("out").strip()
version_text = dbutils.widgets.get("version").strip()
version = int(version_text) if version_text else None
change_data_feed = CDF_CHOICES[dbutils.widgets.get("change_data_feed")]
compression = dbutils.widgets.get("compression").strip() or None
resync = dbutils.widgets.get("resync") == "true"
mode = dbutils.widgets.get("mode")
key = [name.strip() for name in dbutils.widgets.get("key").split(",") if name.strip()] or None

# COMMAND ----------


def create_demo_table(name: str) -> None:
    """The demo events table, 100 events with its Change Data Feed on, when it does not exist yet."""
    ids = list(range(100))
    if os.path.isabs(name):  # a Delta path (a run outside Databricks, where Spark reads Delta with delta-rs)
        if os.path.isdir(os.path.join(name, "_delta_log")):
            return
        import pyarrow as pa
        from deltalake import write_deltalake

        events = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "text": [f"event {i}" for i in ids],
                "score": pa.array([[i / 2, -i / 2] for i in ids], pa.list_(pa.float32())),
            }
        )
        write_deltalake(name, events, configuration={"delta.enableChangeDataFeed": "true"})
    else:
        if spark.catalog.tableExists(name):
            return
        quoted = ".".join(f"`{part}`" for part in name.split("."))
        spark.sql(
            f"CREATE TABLE {quoted} (id BIGINT, text STRING, score ARRAY<FLOAT>) "
            f"TBLPROPERTIES (delta.enableChangeDataFeed = true)"
        )
        rows = [(i, f"event {i}", [i / 2, -i / 2]) for i in ids]
        spark.createDataFrame(rows, "id BIGINT, text STRING, score ARRAY<FLOAT>").write.mode("append").saveAsTable(name)
    print(f"created the demo table {name} with {len(ids)} events")


if table == DEMO_TABLE:
    create_demo_table(table)

# COMMAND ----------

from streaming.spark import incremental_to_mds

result = incremental_to_mds(
    table,
    out,
    version=version,
    change_data_feed=change_data_feed,
    compression=compression,
    resync=resync,
    mode=mode,
    key=key,
)
if result.method == "up_to_date":
    print(f"{result.path} already holds version {result.version} of {table}: nothing to do")
else:
    print(
        f"{table} v{result.previous_version} -> v{result.version} ({result.method}): appended {result.samples} rows "
        f"in {result.shards} shards to {result.path}"
    )
if result.removed:
    print(f"mirror: removed {result.removed} rows by rewriting {result.shards_rewritten} shards (see `inspect`)")
if result.unapplied_changes:
    print(
        f"note: {result.unapplied_changes} rows of v{result.previous_version} are no longer in the table (deleted, "
        f"or old values of updated rows); the append-only dataset keeps them"
    )
if result.ignored_columns:
    print(f"note: the table's columns {result.ignored_columns} came after the dataset's first run and are not in it")

# COMMAND ----------

# The run's result is the job's exit value. A mirror's rewrite counters (rows removed, shards rewritten, bytes read and
# written to rewrite them) are left out of an append run's, where their 0 would read as "wrote nothing".
MIRROR_ONLY = ("removed", "shards_rewritten", "bytes_read", "bytes_written")
record = result.to_json()
if result.mode == "append":
    record = {name: value for name, value in record.items() if name not in MIRROR_ONLY}
dbutils.notebook.exit(json.dumps(record))
