"""Each machine's share of a Databricks workspace's request budget, handed to a conversion's tasks.

The budget (`streaming.storage.workspace_budget`) is shared by every process of one machine; tasks running on
several machines must divide the workspace's limits among them. The driver counts the machines the application's
executors run on (its own included: it lists and commits while tasks write) and puts the count into the tasks'
environment. On Spark Connect there is no executor list: the count stays 1 (executors on Databricks reach
`/Volumes` through the mount, not the Files API).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming.storage.workspace_budget import MACHINES_ENV


def task_environment(frame: Any, executor_env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment a task sets while it writes: the machine count when above 1, then `executor_env` (which wins)."""
    machines = executor_machines(frame.sparkSession)
    environment = {MACHINES_ENV: str(machines)} if machines > 1 else {}
    environment.update(executor_env or {})
    return environment


def executor_machines(session: Any) -> int:
    """How many hosts the application's executors and driver run on (1 when Spark cannot say)."""
    try:
        infos = session.sparkContext.statusTracker()._jtracker.getExecutorInfos()
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return 1
    return max(1, len({info.host() for info in infos}))
