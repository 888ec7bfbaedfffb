# Databricks notebook source
# MAGIC %md
# MAGIC # 3 · Scheduled job: append what is new in a Delta table to the MDS dataset
# MAGIC
# MAGIC Each run converts only the rows added to `table` since the version the dataset holds, into their own folder
# MAGIC of the dataset, and then publishes the dataset's `index.json` with them appended: one atomic update. Readers
# MAGIC see all of a run's rows or none. The version the dataset holds is read from that index, so:
# MAGIC
# MAGIC * a run at the table version the dataset already holds changes nothing;
# MAGIC * a run that fails (or a cluster that dies) leaves the dataset as it was, and the next run redoes the work.
# MAGIC
# MAGIC New rows come from the table's Change Data Feed when it is enabled
# MAGIC (`ALTER TABLE … SET TBLPROPERTIES (delta.enableChangeDataFeed = true)`), otherwise from comparing the two
# MAGIC table versions. The dataset is append-only: rows later deleted or updated in the table stay as they were
# MAGIC (the run reports how many). A dataset first written by notebook 1 from this table continues from the
# MAGIC version notebook 1 recorded.
# MAGIC
# MAGIC **Schedule it**: *Workflows → Jobs → Create job*, task type *Notebook*, this notebook, parameters `table` and
# MAGIC `out`, a schedule (e.g. hourly) or a *Table update* trigger on the table, and *Maximum concurrent runs* = 1.
# MAGIC
# MAGIC **Widgets**: `table` (name or Delta path), `out` (the dataset folder in a volume), `version` (empty: the
# MAGIC latest), `change_data_feed` (`auto` uses it when the table has it enabled).

# COMMAND ----------

# What to install: the published package (default), a wheel in a volume
# (`/Volumes/<catalog>/<schema>/<volume>/mds_streaming-<version>-py3-none-any.whl`) or a Git URL
# (`git+https://<host>/<org>/<repo>.git@<tag>`).
dbutils.widgets.text("install", "mds-streaming", "pip requirement of mds-streaming")
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


def default_location(name: str) -> str:
    """A dataset folder in the demo volume on Databricks, in a temporary folder anywhere else."""
    if "DATABRICKS_RUNTIME_VERSION" in os.environ:
        return f"/Volumes/main/default/mds_demo/{name}"
    return os.path.join(tempfile.gettempdir(), "mds_demo", name)


dbutils.widgets.text("table", "main.default.mds_demo_events", "Delta table (name or path)")
dbutils.widgets.text("out", default_location("events"), "MDS dataset folder")
dbutils.widgets.text("version", "", "Table version (empty: latest)")
dbutils.widgets.dropdown("change_data_feed", "auto", list(CDF_CHOICES), "Use the Change Data Feed")
dbutils.widgets.text("compression", "zstd", "Shard compression (empty: none)")

table = dbutils.widgets.get("table").strip()
out = dbutils.widgets.get("out").strip()
version_text = dbutils.widgets.get("version").strip()
version = int(version_text) if version_text else None
change_data_feed = CDF_CHOICES[dbutils.widgets.get("change_data_feed")]
compression = dbutils.widgets.get("compression").strip() or None

# COMMAND ----------

from streaming.spark import incremental_to_mds

result = incremental_to_mds(table, out, version=version, change_data_feed=change_data_feed, compression=compression)
if result.method == "up_to_date":
    print(f"{result.path} already holds version {result.version} of {table}: nothing to do")
else:
    print(
        f"{table} v{result.previous_version} -> v{result.version} ({result.method}): appended {result.samples} rows "
        f"in {result.shards} shards to {result.path}"
    )
if result.unapplied_changes:
    print(
        f"note: {result.unapplied_changes} rows were deleted or updated in the table; the dataset keeps them as "
        f"they were"
    )

# COMMAND ----------

dbutils.notebook.exit(json.dumps(result.to_json()))
