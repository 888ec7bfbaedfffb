"""Refuse, on the driver and before any task starts, a destination the executors of this compute cannot reach.

What a Spark task can reach depends on where it runs, not on what the notebook can reach:

* **Off Databricks** (a laptop, CI, another Spark): whatever that cluster gives its executors. Only `dbfs:/` paths
  outside `/Volumes` (the DBFS REST API, which needs workspace credentials) are checked: `executor_env` must carry
  them.
* **Classic compute**, dedicated (single user) or no-isolation access: the executors hold the cluster's own cloud
  credentials (instance profile, service credential, cluster environment variables), reach the network and see
  `/Volumes` (and `/dbfs`) through the mounts on every node. They hold no workspace token: the notebook's context is
  the driver's.
* **Standard access mode** (formerly shared): tasks run as sandboxed UDFs. They reach the network, but the cluster's
  credentials are hidden from user code, DBFS has no FUSE mount, and a local path is the task's own sandbox; only
  `/Volumes` is shared. Cloud storage needs credentials handed to the tasks (`executor_env`).
* **Serverless**: sandboxed UDFs that cannot access the internet. Only `/Volumes` is reachable.

The mode is read from every signal a Databricks driver gives, in this order:

1. `MDS_STREAMING_ACCESS_MODE` (`classic`, `standard` or `serverless`), the user's own statement, wins;
2. serverless: `IS_SERVERLESS=TRUE`, or `DATABRICKS_RUNTIME_VERSION` of the form `client.<n>`;
3. off Databricks: no `DATABRICKS_RUNTIME_VERSION`;
4. the cluster tag `spark.databricks.clusterUsageTags.dataSecurityMode` (`USER_ISOLATION` and its successors mean
   standard access, `SINGLE_USER`, `NONE` and theirs classic), unless a sandbox signal below contradicts it;
5. the sandbox's own settings: table ACLs (`spark.databricks.acl.dfAclsEnabled`, `spark.databricks.acl.sqlOnly`) or
   Python process isolation (`spark.databricks.pyspark.enableProcessIsolation`) on, or a Spark Connect session with
   no `sparkContext` on a cluster (what standard access gives a notebook): standard access.

A cluster where none of these can be read is `UNKNOWN`: its destinations get the strictest mode's (serverless)
checks, and a refusal says how to state the mode.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from streaming.storage.registry import exclusive_storage_for, storage_for
from streaming.storage.url import split_url

OFF_DATABRICKS = "off Databricks"
CLASSIC = "classic compute (dedicated or no-isolation access mode)"
STANDARD = "standard access mode (formerly shared)"
SERVERLESS = "serverless compute"
UNKNOWN = "compute whose access mode could not be read"
ACCESS_MODE_ENV = "MDS_STREAMING_ACCESS_MODE"
STATED_MODES = {"classic": CLASSIC, "standard": STANDARD, "serverless": SERVERLESS}
SECURITY_MODE_TAG = "spark.databricks.clusterUsageTags.dataSecurityMode"
STANDARD_TAGS = frozenset({"USER_ISOLATION", "STANDARD", "DATA_SECURITY_MODE_STANDARD", "LEGACY_TABLE_ACL"})
CLASSIC_TAGS = frozenset(
    {"SINGLE_USER", "NONE", "DEDICATED", "DATA_SECURITY_MODE_DEDICATED", "LEGACY_SINGLE_USER", "LEGACY_PASSTHROUGH"}
)
#: Settings that are "true" only where user code runs sandboxed (table ACLs, Python process isolation).
SANDBOX_SETTINGS = (
    "spark.databricks.acl.dfAclsEnabled",
    "spark.databricks.acl.sqlOnly",
    "spark.databricks.pyspark.enableProcessIsolation",
)
UNKNOWN_HINT = (
    f"The access mode could not be read here ({SECURITY_MODE_TAG} is missing or unreadable and nothing else tells), "
    f"so the strictest mode's rules applied. If this compute is dedicated (single user) or standard, say so with the "
    f"environment variable {ACCESS_MODE_ENV}=classic or {ACCESS_MODE_ENV}=standard (a cluster's Spark config: "
    f"spark.executorEnv and the cluster's environment variables; a notebook: os.environ)."
)
# One of these, with DATABRICKS_HOST, lets the SDK on an executor authenticate (a token, OAuth M2M, a profile).
EXECUTOR_CREDENTIALS = ("DATABRICKS_TOKEN", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE")
VOLUMES_HINT = (
    "write to a Unity Catalog volume instead (/Volumes/<catalog>/<schema>/<volume>/...), mounted on every node"
)


def uses_dbfs_api(url: str) -> bool:
    """Whether `url` is written through the DBFS API: a `dbfs:/` path outside `/Volumes`."""
    location = split_url(url)
    return location.scheme == "dbfs" and not location.key.startswith("/Volumes/")


def access_mode(spark: Any = None) -> str:
    """Where this driver runs: `OFF_DATABRICKS`, `CLASSIC`, `STANDARD`, `SERVERLESS` or `UNKNOWN` (module docstring)."""
    stated = os.environ.get(ACCESS_MODE_ENV, "").strip().lower()
    if stated:
        if stated not in STATED_MODES:
            raise ValueError(f"{ACCESS_MODE_ENV}={stated!r}: state one of {', '.join(STATED_MODES)}")
        return STATED_MODES[stated]
    runtime = os.environ.get("DATABRICKS_RUNTIME_VERSION", "")
    if os.environ.get("IS_SERVERLESS", "").upper() == "TRUE" or runtime.startswith("client."):
        return SERVERLESS
    if not runtime:
        return OFF_DATABRICKS
    session = _session(spark)
    sandboxed = any((_conf(session, key) or "").lower() == "true" for key in SANDBOX_SETTINGS)
    tag = (_conf(session, SECURITY_MODE_TAG) or "").upper()
    if tag in STANDARD_TAGS or sandboxed or (session is not None and not _has_spark_context(session)):
        return STANDARD
    return CLASSIC if tag in CLASSIC_TAGS else UNKNOWN


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


def _conf(spark: Any, key: str) -> str | None:
    """A Spark setting of `spark`, or None (no session; serverless and standard access refuse many keys outright)."""
    try:
        return None if spark is None else spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - no pyspark, no session, or a key the compute will not show
        return None


def check_executor_access(url: str, executor_env: Mapping[str, str] | None, spark: Any = None) -> None:
    """Raise ValueError naming `/Volumes` and the access mode if the executors of this compute cannot reach `url`."""
    from streaming.storage.databricks import VolumesStorage, require_files_api

    location = split_url(url)
    volume = location.scheme in ("", "file", "dbfs") and location.key.startswith("/Volumes/")
    if volume and isinstance(exclusive_storage_for(url), VolumesStorage):
        require_files_api(url)  # the commit goes through the Files API, which the runtime's own SDK may lack
    mode = access_mode(spark)
    env = executor_env or {}
    reason = _unreachable(url, SERVERLESS if mode == UNKNOWN else mode, env)
    if reason is not None:
        where = "" if mode == OFF_DATABRICKS else f" On {mode}, "
        hint = f" {UNKNOWN_HINT}" if mode == UNKNOWN else ""
        raise ValueError(f"{url}:{where or ' '}{reason}{hint}")


def _unreachable(url: str, mode: str, env: Mapping[str, str]) -> str | None:
    """Why the executors of `mode` cannot reach `url`, or None if they can."""
    from streaming.storage.databricks import VolumesStorage
    from streaming.storage.local import LocalStorage

    workspace_credentials = bool(env.get("DATABRICKS_HOST")) and any(env.get(name) for name in EXECUTOR_CREDENTIALS)
    sandboxed = mode in (STANDARD, SERVERLESS)
    if uses_dbfs_api(url):
        if mode == SERVERLESS:
            return f"the tasks cannot access the internet, so not the DBFS API either; {VOLUMES_HINT}."
        if workspace_credentials:
            return None
        return (
            "a dbfs:/ path outside /Volumes is written by the Spark executors through the DBFS API, and the executors "
            "have no workspace credentials for it (only the driver's notebook or job context has them). Choices: "
            f"{VOLUMES_HINT}; or pass executor_env={{'DATABRICKS_HOST': ..., 'DATABRICKS_TOKEN': ...}} (or "
            "DATABRICKS_CLIENT_ID/DATABRICKS_CLIENT_SECRET of a service principal, e.g. from a secret scope)."
        )
    if mode == OFF_DATABRICKS:
        return None
    backend = storage_for(url)
    if isinstance(backend, VolumesStorage):
        # On Databricks every node mounts /Volumes; a volume the driver does not see mounted means the executors
        # would need the Files API, with workspace credentials they do not have.
        if workspace_credentials and mode != SERVERLESS:
            return None
        return (
            "this /Volumes path is not mounted on the driver, so the tasks would need the Files API, for which they "
            "have no workspace credentials"
            + (" and no internet access" if mode == SERVERLESS else " (pass them in executor_env)")
            + "; check that the volume exists and the compute has Unity Catalog access, then write to its "
            "/Volumes/<catalog>/<schema>/<volume>/... path."
        )
    if isinstance(backend, LocalStorage):
        if not sandboxed or split_url(url).key.startswith("/Volumes/"):
            return None
        return (
            "the tasks run as sandboxed UDFs, so a local path is each task's own disk (and DBFS has no FUSE mount "
            f"there): the driver would never see what they wrote; {VOLUMES_HINT}."
        )
    scheme = split_url(url).scheme
    if mode == SERVERLESS:
        return (
            f"the tasks run as sandboxed UDFs that cannot access the internet, so not {scheme}:// storage; "
            f"{VOLUMES_HINT}."
        )
    if mode == STANDARD and not any(env.get(name) for name in type(backend).env_vars):
        return (
            f"the tasks run as sandboxed UDFs and the cluster's credentials (instance profile, service credential) "
            f"are hidden from them, so they cannot authenticate to {scheme}:// storage. Choices: {VOLUMES_HINT}; or "
            f"pass the storage's credentials in executor_env (one of {', '.join(type(backend).env_vars)}); or run on "
            "classic (dedicated) compute."
        )
    return None
