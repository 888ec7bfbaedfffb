"""Refuse, on the driver, a destination the executors cannot write with what a Databricks cluster gives them.

Tasks write `dbfs:/` paths outside `/Volumes` through the DBFS REST API, which needs workspace credentials. On a
cluster only the driver's notebook or job context holds them; executors have none (no `DATABRICKS_*`, no
`~/.databrickscfg`), so every task would fail after the job started. Unity Catalog volumes are mounted on every
node (`/Volumes/...` is written as local files there), so they need nothing; DBFS needs credentials handed to the
tasks through `executor_env`.
"""

from __future__ import annotations

from collections.abc import Mapping

from streaming.storage.url import split_url

# One of these, with DATABRICKS_HOST, lets the SDK on an executor authenticate (a token, OAuth M2M, a profile).
EXECUTOR_CREDENTIALS = ("DATABRICKS_TOKEN", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE")


def uses_dbfs_api(url: str) -> bool:
    """Whether `url` is written through the DBFS API: a `dbfs:/` path outside `/Volumes`."""
    location = split_url(url)
    return location.scheme == "dbfs" and not location.key.startswith("/Volumes/")


def check_executor_access(url: str, executor_env: Mapping[str, str] | None) -> None:
    """Raise ValueError before any task starts if the executors would have no credentials for `url`."""
    if not uses_dbfs_api(url):
        return
    env = executor_env or {}
    if env.get("DATABRICKS_HOST") and any(env.get(name) for name in EXECUTOR_CREDENTIALS):
        return
    raise ValueError(
        f"{url}: a dbfs:/ path outside /Volumes is written by the Spark executors through the DBFS API, and on a "
        "Databricks cluster the executors have no workspace credentials for it (only the driver's notebook or job "
        "context has them). Choices: write to a Unity Catalog volume (/Volumes/<catalog>/<schema>/<volume>/...), "
        "mounted on every node; or pass executor_env={'DATABRICKS_HOST': ..., 'DATABRICKS_TOKEN': ...} "
        "(or DATABRICKS_CLIENT_ID/DATABRICKS_CLIENT_SECRET of a service principal, e.g. from a secret scope)."
    )
