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

The mode is read from what Databricks sets on the driver: `DATABRICKS_RUNTIME_VERSION` (set on Databricks;
`client.<n>` on serverless, which also sets `IS_SERVERLESS=TRUE`) and the cluster tag
`spark.databricks.clusterUsageTags.dataSecurityMode` (`USER_ISOLATION` and its successors mean standard access). The
tag is internal: a cluster whose tag is missing or unknown is taken as classic, the least restrictive mode, and still
has its `dbfs:/` destinations checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from streaming.storage.registry import storage_for
from streaming.storage.url import split_url

OFF_DATABRICKS = "off Databricks"
CLASSIC = "classic compute (dedicated or no-isolation access mode)"
STANDARD = "standard access mode (formerly shared)"
SERVERLESS = "serverless compute"
SECURITY_MODE_TAG = "spark.databricks.clusterUsageTags.dataSecurityMode"
STANDARD_TAGS = frozenset({"USER_ISOLATION", "STANDARD", "DATA_SECURITY_MODE_STANDARD", "LEGACY_TABLE_ACL"})
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
    """Where this driver runs: `OFF_DATABRICKS`, `CLASSIC`, `STANDARD` or `SERVERLESS`."""
    runtime = os.environ.get("DATABRICKS_RUNTIME_VERSION", "")
    if os.environ.get("IS_SERVERLESS", "").upper() == "TRUE" or runtime.startswith("client."):
        return SERVERLESS
    if not runtime:
        return OFF_DATABRICKS
    tag = (_conf(spark, SECURITY_MODE_TAG) or "").upper()
    return STANDARD if tag in STANDARD_TAGS else CLASSIC


def _conf(spark: Any, key: str) -> str | None:
    """A Spark setting of `spark` (else the active session), or None (serverless refuses many keys outright)."""
    try:
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
        return None if spark is None else spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - no pyspark, no session, or a key the compute will not show
        return None


def check_executor_access(url: str, executor_env: Mapping[str, str] | None, spark: Any = None) -> None:
    """Raise ValueError naming `/Volumes` and the access mode if the executors of this compute cannot reach `url`."""
    mode = access_mode(spark)
    env = executor_env or {}
    reason = _unreachable(url, mode, env)
    if reason is not None:
        where = "" if mode == OFF_DATABRICKS else f" On {mode}, "
        raise ValueError(f"{url}:{where or ' '}{reason}")


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
