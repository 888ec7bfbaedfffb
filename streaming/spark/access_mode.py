"""Where a conversion's Spark tasks run: the Databricks access mode, read from the environment and the session.

The mode decides what the tasks can reach (`streaming.spark.executor_access`). It is read from every signal a
driver has, in this order:

1. `MDS_STREAMING_ACCESS_MODE` (`classic`, `standard` or `serverless`), the user's own statement, wins;
2. on a Databricks driver (`DATABRICKS_RUNTIME_VERSION` set): serverless when `IS_SERVERLESS=TRUE` or the runtime is
   `client.<n>`; else the cluster's `dataSecurityMode` tag and sandbox settings (below), where a Spark Connect session
   (no `sparkContext`, what standard access gives a notebook) also means standard access;
3. anywhere else (a laptop, CI, a job of another scheduler) the session itself says whether it reaches Databricks.
   A Databricks Connect session to serverless compute sends the header ``x-databricks-session-id`` and no cluster
   id; one to a cluster sends ``x-databricks-cluster-id``, and the cluster's tags (``spark.databricks.
   clusterUsageTags.*``) answer its conf reads as they do on the cluster. Such a session is a *remote client*: the
   tasks run on Databricks, the driver code here. A session showing neither (a local Spark, a plain Spark Connect
   server) is off Databricks.

On a cluster, the tag `spark.databricks.clusterUsageTags.dataSecurityMode` holds the cluster's `data_security_mode`
(the Clusters API's values, every one mapped in `TAG_MODES`), unless a sandbox setting contradicts it: table ACLs
(`spark.databricks.acl.dfAclsEnabled`, `spark.databricks.acl.sqlOnly`) or Python process isolation
(`spark.databricks.pyspark.enableProcessIsolation`) on mean standard access whatever the tag says.
`DATA_SECURITY_MODE_AUTO` is resolved as Databricks documents it: dedicated on an ML or GPU runtime or one before
14.3, else standard (read from `spark.databricks.clusterUsageTags.sparkVersion`, e.g. ``15.4.x-gpu-ml-scala2.12``).
A cluster where none of this can be read is `UNKNOWN`: its destinations get the strictest mode's (serverless)
checks, and a refusal says how to state the mode.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

OFF_DATABRICKS = "off Databricks"
CLASSIC = "classic compute (dedicated or no-isolation access mode)"
STANDARD = "standard access mode (formerly shared)"
SERVERLESS = "serverless compute"
UNKNOWN = "compute whose access mode could not be read"
ACCESS_MODE_ENV = "MDS_STREAMING_ACCESS_MODE"
STATED_MODES = {"classic": CLASSIC, "standard": STANDARD, "serverless": SERVERLESS}
SECURITY_MODE_TAG = "spark.databricks.clusterUsageTags.dataSecurityMode"
CLUSTER_ID_TAG = "spark.databricks.clusterUsageTags.clusterId"
RUNTIME_TAG = "spark.databricks.clusterUsageTags.sparkVersion"
#: The gRPC headers a Databricks Connect client sends: a serverless session's id, or the cluster it runs on.
SESSION_HEADER = "x-databricks-session-id"
CLUSTER_HEADER = "x-databricks-cluster-id"
AUTO_TAG = "DATA_SECURITY_MODE_AUTO"
#: Every `data_security_mode` the Clusters API documents (databricks-sdk's `compute.DataSecurityMode`), and what its
#: tasks are: standard (sandboxed, shared: user isolation, the legacy table-ACL and high-concurrency passthrough
#: clusters) or classic (one user's or unisolated: dedicated, no isolation, the legacy single-user modes). The
#: short `STANDARD` and `DEDICATED` are the names the UI shows.
TAG_MODES = {
    "USER_ISOLATION": STANDARD,
    "DATA_SECURITY_MODE_STANDARD": STANDARD,
    "STANDARD": STANDARD,
    "LEGACY_TABLE_ACL": STANDARD,
    "LEGACY_PASSTHROUGH": STANDARD,
    "SINGLE_USER": CLASSIC,
    "DATA_SECURITY_MODE_DEDICATED": CLASSIC,
    "DEDICATED": CLASSIC,
    "NONE": CLASSIC,
    "LEGACY_SINGLE_USER": CLASSIC,
    "LEGACY_SINGLE_USER_STANDARD": CLASSIC,
}
#: Settings that are "true" only where user code runs sandboxed (table ACLs, Python process isolation).
SANDBOX_SETTINGS = (
    "spark.databricks.acl.dfAclsEnabled",
    "spark.databricks.acl.sqlOnly",
    "spark.databricks.pyspark.enableProcessIsolation",
)
_RUNTIME_VERSION = re.compile(r"(\d+)\.(\d+)")


@dataclass(frozen=True)
class Compute:
    """Where the tasks run (`mode`), and whether this driver code runs elsewhere (a Databricks Connect client)."""

    mode: str
    remote_client: bool = False


def access_mode(spark: Any = None) -> str:
    """Where the tasks of `spark` (default: the active session) run: one of the mode constants (module docstring)."""
    return detect(spark).mode


def detect(spark: Any = None) -> Compute:
    """The `Compute` of `spark` (default: the active session), from the environment, then the session."""
    stated = os.environ.get(ACCESS_MODE_ENV, "").strip().lower()
    runtime = os.environ.get("DATABRICKS_RUNTIME_VERSION", "")
    session = _session(spark)
    if stated:
        if stated not in STATED_MODES:
            raise ValueError(f"{ACCESS_MODE_ENV}={stated!r}: state one of {', '.join(STATED_MODES)}")
        return Compute(STATED_MODES[stated], remote_client=not runtime and _remote_target(session) is not None)
    if os.environ.get("IS_SERVERLESS", "").upper() == "TRUE" or runtime.startswith("client."):
        return Compute(SERVERLESS)
    if runtime:
        connect = session is not None and not _has_spark_context(session)
        return Compute(_cluster_mode(session, runtime, connect_means_standard=connect))
    target = _remote_target(session)
    if target is None:
        return Compute(OFF_DATABRICKS)
    if target == SERVERLESS:
        return Compute(SERVERLESS, remote_client=True)
    return Compute(_cluster_mode(session, "", connect_means_standard=False), remote_client=True)


def _remote_target(session: Any) -> str | None:
    """For a session off Databricks: `SERVERLESS` or `"cluster"` when it runs on Databricks compute, else None."""
    headers = _connect_headers(session)
    if SESSION_HEADER in headers and CLUSTER_HEADER not in headers:
        return SERVERLESS
    if CLUSTER_HEADER in headers or _conf(session, CLUSTER_ID_TAG):
        return "cluster"
    return None


def _cluster_mode(session: Any, runtime: str, connect_means_standard: bool) -> str:
    """A cluster's mode from its tag and sandbox settings (`runtime`: the driver's runtime version, if known)."""
    if connect_means_standard or any((_conf(session, key) or "").lower() == "true" for key in SANDBOX_SETTINGS):
        return STANDARD
    tag = (_conf(session, SECURITY_MODE_TAG) or "").strip().upper()
    if tag == AUTO_TAG:
        return _auto_mode(_conf(session, RUNTIME_TAG) or runtime)
    return TAG_MODES.get(tag, UNKNOWN)


def _auto_mode(runtime: str) -> str:
    """What `DATA_SECURITY_MODE_AUTO` chose: dedicated on an ML or GPU runtime or one before 14.3, else standard."""
    version = _RUNTIME_VERSION.match(runtime)
    if version is None:
        return UNKNOWN
    flavours = set(re.split(r"[-.]", runtime.lower()))
    if "ml" in flavours or "gpu" in flavours or (int(version[1]), int(version[2])) < (14, 3):
        return CLASSIC
    return STANDARD


def _session(spark: Any) -> Any:
    """`spark`, else the active session (classic or Spark Connect), else None."""
    if spark is not None:
        return spark
    try:
        from pyspark.sql import SparkSession

        classic = SparkSession.getActiveSession()
        if classic is not None:
            return classic
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        return ConnectSession.getActiveSession()
    except Exception:  # noqa: BLE001 - no pyspark, or no Spark Connect client installed
        return None


def _has_spark_context(session: Any) -> bool:
    """Whether `session` is a classic session (Spark Connect's has no `sparkContext`: it raises)."""
    try:
        return session.sparkContext is not None
    except Exception:  # noqa: BLE001 - Spark Connect raises its own error for sparkContext
        return False


def _connect_headers(session: Any) -> set[str]:
    """The names of the gRPC headers a Spark Connect session sends (empty for a classic session or none).

    Databricks' own Connect client offers them as ``client.metadata()``; Apache Spark's keeps them on the client's
    channel builder, whose ``metadata()`` is what every request sends.
    """
    try:
        client = None if session is None else session.client
    except Exception:  # noqa: BLE001 - a classic session refuses `client` (pyspark raises its own error)
        return set()
    for holder in (client, getattr(client, "_builder", None)):
        metadata = getattr(holder, "metadata", None)
        if callable(metadata):
            try:
                return {str(name).lower() for name, _ in metadata()}
            except Exception:  # noqa: BLE001 - a client of another shape: no header is known
                continue
    return set()


def _conf(spark: Any, key: str) -> str | None:
    """A Spark setting of `spark`, or None (no session; serverless and standard access refuse many keys outright)."""
    try:
        return None if spark is None else spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - no pyspark, no session, or a key the compute will not show
        return None
