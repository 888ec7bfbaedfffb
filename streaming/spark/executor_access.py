"""Refuse, on the driver and before any task starts, a destination the executors of this compute cannot reach.

What a Spark task can reach depends on where it runs, not on what the driver can reach (the mode is read by
`streaming.spark.access_mode`):

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

A **Databricks Connect client** (a laptop whose session runs on Databricks compute) is not where the tasks run:
`/Volumes` paths reach them through the nodes' mounts (the driver commits through the Files API), while a local
path is this machine's disk, which no task can write. A mode that could not be read (`UNKNOWN`) gets the strictest
mode's (serverless) checks, and a refusal says how to state the mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming.spark.access_mode import (
    ACCESS_MODE_ENV,
    CLASSIC,
    OFF_DATABRICKS,
    SECURITY_MODE_TAG,
    SERVERLESS,
    STANDARD,
    UNKNOWN,
    Compute,
    access_mode,
    detect,
)
from streaming.storage.registry import exclusive_storage_for, storage_for
from streaming.storage.url import split_url

# The modes and `access_mode` stay importable from here, where callers first found them.
__all__ = [
    "CLASSIC",
    "OFF_DATABRICKS",
    "SERVERLESS",
    "STANDARD",
    "UNKNOWN",
    "access_mode",
    "check_executor_access",
    "uses_dbfs_api",
]
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


def check_executor_access(url: str, executor_env: Mapping[str, str] | None, spark: Any = None) -> None:
    """Raise ValueError naming `/Volumes` and the access mode if the executors of this compute cannot reach `url`."""
    from streaming.storage.databricks import VolumesStorage, require_files_api

    location = split_url(url)
    volume = location.scheme in ("", "file", "dbfs") and location.key.startswith("/Volumes/")
    if volume and isinstance(exclusive_storage_for(url), VolumesStorage):
        require_files_api(url)  # the commit goes through the Files API, which the runtime's own SDK may lack
    compute = detect(spark)
    mode = compute.mode
    env = executor_env or {}
    strictest = Compute(SERVERLESS, compute.remote_client) if mode == UNKNOWN else compute
    reason = _unreachable(url, strictest, env)
    if reason is not None:
        client = " from a Databricks Connect client" if compute.remote_client else ""
        where = "" if mode == OFF_DATABRICKS else f" On {mode}{client}, "
        hint = f" {UNKNOWN_HINT}" if mode == UNKNOWN else ""
        raise ValueError(f"{url}:{where or ' '}{reason}{hint}")


def _unreachable(url: str, compute: Compute, env: Mapping[str, str]) -> str | None:
    """Why the executors of `compute` cannot reach `url`, or None if they can."""
    from streaming.storage.databricks import VolumesStorage
    from streaming.storage.local import LocalStorage

    mode = compute.mode

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
        if compute.remote_client:
            return None  # the tasks run on Databricks nodes, which mount it; the driver here commits via the Files API
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
        if compute.remote_client and not split_url(url).key.startswith("/Volumes/"):
            return (
                "the tasks run on Databricks while this driver code runs here (Databricks Connect), so a local path "
                f"is this machine's disk, which no task can write; {VOLUMES_HINT} (the driver reaches it through the "
                "Files API)."
            )
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
