"""A stand-in for the workspace APIs the real `databricks` CLI calls to validate, deploy and run a bundle.

Built on `fake_databricks.py` (its Files API serves the wheel upload into a volume, and refuses a volume that does
not exist with the service's 404 "Volume 'c.s.v' does not exist."), it adds what `databricks bundle validate`,
`bundle deploy` (direct engine) and `bundle run` call, found by running the CLI v1.13.0 against it with
`--log-level=debug`, and answers as the services do:

* Identity: `GET /api/2.0/preview/scim/v2/Me` for the token's principal, a user (`userName` is an email) or a
  service principal (`userName` is its application id, a UUID), with its groups; `GET /.well-known/databricks-config`
  (host metadata; from fake_databricks) and `POST /telemetry-ext`.
* Workspace files: `workspace/get-status`, `list`, `mkdirs`, `delete`, `import`, `export` and
  `workspace-files/import-file/<path>` / `GET workspace-files/<path>`. A `.py` file that starts with
  `# Databricks notebook source` becomes a notebook without its extension; an import into a missing folder answers
  404, an existing file without `overwrite` 409 (a notebook 400 "... already exists."). `/Workspace/x` is `/x`. Every
  principal has its home folder `/Users/<userName>`.
* Unity Catalog: `GET /api/2.1/unity-catalog/volumes/<c.s.v>` and `POST /api/2.1/unity-catalog/volumes` (what
  `databricks volumes create` sends; the schema must exist: `--schema c.s`, or that of a `--volume`).
* Jobs 2.0-2.2: `jobs/create`, `reset`, `get`, `list`, `delete`, `run-now`, `runs/get`, `runs/get-output`,
  `runs/cancel`. Refused as the Jobs API refuses them: `run_as.user_name` that is no user's email (a service
  principal's application id among them), `run_as.service_principal_name` that is no service principal,
  a `job_cluster_key` no job cluster defines, a task environment on a notebook task, a `node_type_id` that this
  workspace's cloud (`--cloud`) does not offer.
* Permissions: `GET`/`PUT`/`PATCH /api/2.0/permissions/<type>/<id>` (jobs, directories). A `user_name` that is no
  user answers 400 "Principal: UserName(x) does not exist", likewise `service_principal_name` and `group_name`; a job
  has exactly one owner (the creator, unless the list names another user or service principal `IS_OWNER`), never
  a group.

A run executes its notebook task on this machine, the way a cluster would: the deployed notebook (the workspace's
copy) is run by `notebooks/run_local.py` (`--notebook-runner`) with the task's `base_parameters` overlaid by the
run's `notebook_params`, in one kept virtualenv (the cluster's notebook environment, where `%pip` installs), with
`--access-mode classic` for a task on a job cluster and `serverless` for a task without one. Two things the platform
resolves for a cluster are resolved here: a parameter naming a `/Volumes/...` path is given as that path on this
server's disk (the cluster's FUSE mount of the volume; the volume must exist), and a parameter naming a table given
with `--table name=DELTA_PATH` is given as its location (Unity Catalog's name resolution, which a local Spark
session has no metastore for). The run's result is the notebook's `dbutils.notebook.exit` value; its output is kept
in `run-<run id>.log` beside the runner's virtualenv. A run that would exceed `max_concurrent_runs` is skipped.

Run: `python fake_workspace.py PORT ROOT --user TOKEN=EMAIL --service-principal TOKEN=APPLICATION_ID
[--group NAME=MEMBER,...] [--volume c.s.v ...] [--schema c.s ...] [--table name=path ...] [--cloud aws|azure|gcp]
--notebook-runner notebooks/run_local.py --runner-venv FOLDER` (binds 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fake_databricks
from fake_databricks import ApiError

NOTEBOOK_HEADER = b"# Databricks notebook source"
EXIT_MARKER = "[run_local] dbutils.notebook.exit: "
# Node types each cloud offers (a few general-purpose ones per cloud, as its `clusters/list-node-types` lists them).
NODE_TYPES = {
    "aws": {"i3.xlarge", "m5d.xlarge", "m6gd.xlarge", "r5d.xlarge"},
    "azure": {"Standard_D4ds_v5", "Standard_DS3_v2", "Standard_E4ds_v5", "Standard_F4s_v2"},
    "gcp": {"n2-standard-4", "n2-highmem-4", "n1-standard-4", "e2-standard-4"},
}
JOB_PERMISSION_LEVELS = {"CAN_VIEW", "CAN_MANAGE_RUN", "CAN_MANAGE", "IS_OWNER"}
DIRECTORY_PERMISSION_LEVELS = {"CAN_READ", "CAN_RUN", "CAN_EDIT", "CAN_MANAGE"}


@dataclass
class Principal:
    """A user (`user_name` is an email) or a service principal (`user_name` is its application id)."""

    id: str
    user_name: str
    display_name: str
    service_principal: bool
    groups: list[str] = field(default_factory=list)

    def me(self) -> dict[str, Any]:
        """The SCIM `Me` answer for this principal."""
        answer: dict[str, Any] = {
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
            "id": self.id,
            "userName": self.user_name,
            "displayName": self.display_name,
            "active": True,
            "groups": [{"display": name, "type": "direct", "value": f"g-{name}"} for name in self.groups],
        }
        if not self.service_principal:
            answer["emails"] = [{"type": "work", "value": self.user_name, "primary": True}]
            answer["name"] = {"givenName": self.display_name}
        return answer


@dataclass
class WorkspaceObject:
    """A folder, file or notebook of the workspace file tree."""

    object_type: str  # DIRECTORY, FILE or NOTEBOOK
    object_id: int
    content: bytes = b""
    modified_at: int = 0

    def info(self, path: str) -> dict[str, Any]:
        answer: dict[str, Any] = {"object_type": self.object_type, "path": path, "object_id": self.object_id}
        if self.object_type == "NOTEBOOK":
            answer["language"] = "PYTHON"
        if self.object_type != "DIRECTORY":
            answer.update(size=len(self.content), modified_at=self.modified_at, created_at=self.modified_at)
        answer["resource_id"] = str(self.object_id)
        return answer


@dataclass
class Run:
    """One job run: its task runs are run one after another in a thread."""

    run_id: int
    job_id: int
    number: int
    settings: dict[str, Any]
    notebook_params: dict[str, str]
    run_as: str
    task_runs: list[dict[str, Any]]
    state: dict[str, str] = field(default_factory=lambda: {"life_cycle_state": "PENDING", "state_message": ""})
    start_time: int = 0
    end_time: int = 0
    outputs: dict[int, dict[str, Any]] = field(default_factory=dict)  # task run id -> runs/get-output fields


class Workspace(fake_databricks.Workspace):
    """fake_databricks' volumes plus principals, the workspace file tree, jobs, runs and permissions."""

    def __init__(self, root: Path, options: argparse.Namespace) -> None:
        super().__init__(root, "", set(options.volume), options)
        self.schemas = {tuple(text.split(".")) for text in options.schema} | {(c, s) for c, s, _ in self.volumes}
        self.cloud = options.cloud
        self.tables = dict(options.table)
        self.runner = options.notebook_runner
        self.runner_venv = options.runner_venv
        self.ids = itertools.count(1000)
        self.principals: dict[str, Principal] = {}
        members: dict[str, list[str]] = {}
        for name, listed in options.group:
            for member in listed.split(","):
                members.setdefault(member, []).append(name)
        self.groups = {name for name, _ in options.group}
        for kind, pairs in (("user", options.user), ("service principal", options.service_principal)):
            for token, user_name in pairs:
                sp = kind == "service principal"
                display = f"{user_name.split('@')[0]} ({kind})"
                self.principals[token] = Principal(
                    str(next(self.ids)), user_name, display, sp, members.get(user_name, [])
                )
        self.objects: dict[str, WorkspaceObject] = {"/": WorkspaceObject("DIRECTORY", 1)}
        for folder in ["/Users", "/Shared"] + [f"/Users/{p.user_name}" for p in self.principals.values()]:
            self.objects[folder] = WorkspaceObject("DIRECTORY", next(self.ids))
        self.jobs: dict[int, dict[str, Any]] = {}
        self.runs: dict[int, Run] = {}
        self.acls: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.owners: dict[tuple[str, str], str] = {}

    def users(self) -> set[str]:
        return {p.user_name for p in self.principals.values() if not p.service_principal}

    def service_principals(self) -> set[str]:
        return {p.user_name for p in self.principals.values() if p.service_principal}


def workspace_path(path: str) -> str:
    """The workspace path without the `/Workspace` mount prefix, normalised (`/Workspace/Users/x` is `/Users/x`)."""
    if not path.startswith("/"):
        raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Path ({path}) is not absolute.")
    normal = os.path.normpath(path).replace("//", "/")
    if normal == "/Workspace":
        return "/"
    return normal[len("/Workspace") :] if normal.startswith("/Workspace/") else normal


class Handler(fake_databricks.Handler):
    """fake_databricks' Files API and DBFS API, plus the APIs a bundle's validate, deploy and run call."""

    server: Server

    @property
    def workspace(self) -> Workspace:
        return self.server.workspace  # type: ignore[return-value]

    def principal(self) -> Principal:
        header = self.headers.get("Authorization") or ""
        token = header[len("Bearer ") :] if header.startswith("Bearer ") else ""
        principal = self.workspace.principals.get(token)
        if principal is None:
            raise ApiError(401, "UNAUTHENTICATED", "Invalid access token.")
        return principal

    def _authenticated(self) -> bool:
        try:
            self.principal()
        except ApiError:
            return False
        return True

    def _route(self, raw_path: str, path: str, query: dict[str, str], body: bytes, storage: bool, within: bool) -> None:
        if raw_path == "/telemetry-ext" and not storage:
            # Accepted and dropped; the count tells the CLI every log arrived (else it sends them twice more).
            logs = json.loads(body or b"{}").get("protoLogs") or []
            self._json(200, {"errors": [], "numProtoSuccess": len(logs)})
            return
        super()._route(raw_path, path, query, body, storage, within)

    def _api(self, raw_path: str, path: str, query: dict[str, str], body: bytes) -> None:
        principal = self.principal()
        args: dict[str, Any] = dict(query)
        if body and self.headers.get("Content-Type", "").startswith("application/json"):
            args.update(json.loads(body))
        with self.workspace.lock:
            answer = self._workspace_api(path, args, body, principal)
        if answer is None:
            super()._api(raw_path, path, query, body)
        elif isinstance(answer, bytes):
            self._send(200, answer, {"Content-Type": "application/octet-stream"})
        else:
            self._json(200, answer)

    def _workspace_api(
        self, path: str, args: dict[str, Any], body: bytes, principal: Principal
    ) -> dict[str, Any] | bytes | None:
        """The answer of an endpoint of this module (bytes: a file's content), or None for fake_databricks' own."""
        command = self.command
        if path == "/api/2.0/preview/scim/v2/Me" and command == "GET":
            return principal.me()
        if path.startswith("/api/2.0/workspace-files/import-file/") and command == "POST":
            overwrite = args.get("overwrite") == "true"
            return self._import("/" + path[len("/api/2.0/workspace-files/import-file/") :], body, overwrite)
        if path.startswith("/api/2.0/workspace-files/") and command == "GET":
            return self._object(workspace_path("/" + path[len("/api/2.0/workspace-files/") :])).content
        if path.startswith("/api/2.0/workspace/"):
            return self._workspace_call(path[len("/api/2.0/workspace/") :], args)
        if path.startswith("/api/2.1/unity-catalog/volumes"):
            return self._volumes(path[len("/api/2.1/unity-catalog/volumes") :], args, principal)
        match = re.fullmatch(r"/api/2\.[012]/jobs/(.+)", path)
        if match:
            return self._jobs(match.group(1), args, principal)
        match = re.fullmatch(r"/api/2\.0/permissions/(jobs|directories)/([^/]+)", path)
        if match:
            return self._permissions(match.group(1), match.group(2), args, principal)
        return None

    # -- workspace file tree ----------------------------------------------------------------
    def _object(self, path: str) -> WorkspaceObject:
        found = self.workspace.objects.get(path)
        if found is None:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Path ({path}) doesn't exist.")
        return found

    def _mkdirs(self, path: str) -> None:
        parts = [part for part in path.split("/") if part]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            existing = self.workspace.objects.get(folder)
            if existing is None:
                self.workspace.objects[folder] = WorkspaceObject("DIRECTORY", next(self.workspace.ids))
            elif existing.object_type != "DIRECTORY":
                raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"Cannot create directory {path}: {folder} is a file.")

    def _import(self, raw: str, content: bytes, overwrite: bool) -> dict[str, Any]:
        path = workspace_path(raw)
        parent = os.path.dirname(path)
        if self.workspace.objects.get(parent, WorkspaceObject("FILE", 0)).object_type != "DIRECTORY":
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"The parent folder ({parent}) does not exist.")
        kind = "FILE"
        if path.endswith(".py") and content.startswith(NOTEBOOK_HEADER):
            kind, path = "NOTEBOOK", path[: -len(".py")]
        existing = self.workspace.objects.get(path)
        if existing is not None:
            if existing.object_type == "DIRECTORY":
                raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"Path ({path}) already exists.")
            if not overwrite:
                if existing.object_type == "NOTEBOOK":
                    raise ApiError(400, "", f"Path ({path}) already exists.")
                raise ApiError(409, "", f"File already exists at ({path}).")
        self.workspace.objects[path] = WorkspaceObject(
            kind, existing.object_id if existing else next(self.workspace.ids), content, int(time.time() * 1000)
        )
        return {}

    def _workspace_call(self, action: str, args: dict[str, Any]) -> dict[str, Any] | bytes:
        objects = self.workspace.objects
        if action == "get-status" and self.command == "GET":
            path = workspace_path(args.get("path", ""))
            return self._object(path).info(path)
        if action == "list" and self.command == "GET":
            path = workspace_path(args.get("path", ""))
            if self._object(path).object_type != "DIRECTORY":
                return {"objects": [objects[path].info(path)]}
            prefix = path.rstrip("/") + "/"
            children = sorted(p for p in objects if p.startswith(prefix) and "/" not in p[len(prefix) :] and p != "/")
            return {"objects": [objects[child].info(child) for child in children]} if children else {}
        if action == "mkdirs" and self.command == "POST":
            self._mkdirs(workspace_path(args.get("path", "")))
            return {}
        if action == "delete" and self.command == "POST":
            path = workspace_path(args.get("path", ""))
            self._object(path)
            below = [p for p in objects if p.startswith(path.rstrip("/") + "/")]
            if below and not args.get("recursive"):
                raise ApiError(400, "DIRECTORY_NOT_EMPTY", f"Folder ({path}) is not empty.")
            for gone in [path, *below]:
                del objects[gone]
            return {}
        if action == "import" and self.command == "POST":
            content = base64.b64decode(args.get("content", ""))
            if args.get("format", "SOURCE") not in ("AUTO", "SOURCE", "RAW"):
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Unsupported import format {args.get('format')}")
            if args.get("format", "SOURCE") == "SOURCE" and not content.startswith(NOTEBOOK_HEADER):
                content = NOTEBOOK_HEADER + b"\n" + content
            path = args.get("path", "")
            if args.get("format", "SOURCE") == "SOURCE" and not path.endswith(".py"):
                path += ".py"
            return self._import(path, content, bool(args.get("overwrite")))
        if action == "export" and self.command == "GET":
            found = self._object(workspace_path(args.get("path", "")))
            if args.get("direct_download") == "true":
                return found.content
            return {"content": base64.b64encode(found.content).decode(), "file_type": "py"}
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} /api/2.0/workspace/{action}'")

    # -- Unity Catalog volumes ------------------------------------------------------------------
    def _volumes(self, rest: str, args: dict[str, Any], principal: Principal) -> dict[str, Any]:
        workspace = self.workspace
        if rest == "" and self.command == "POST":
            catalog, schema, name = args.get("catalog_name"), args.get("schema_name"), args.get("name")
            if (catalog, schema) not in workspace.schemas:
                raise ApiError(404, "SCHEMA_DOES_NOT_EXIST", f"Schema '{catalog}.{schema}' does not exist.")
            if (catalog, schema, name) in workspace.volumes:
                raise ApiError(409, "VOLUME_ALREADY_EXISTS", f"Volume '{catalog}.{schema}.{name}' already exists")
            workspace.volumes.add((catalog, schema, name))
            (workspace.root / "Volumes" / catalog / schema / name).mkdir(parents=True, exist_ok=True)
            return self._volume_info((catalog, schema, name), args.get("volume_type", "MANAGED"), principal)
        parts = tuple(rest.lstrip("/").split("."))
        if self.command == "GET" and len(parts) == 3:
            if parts not in workspace.volumes:
                raise ApiError(404, "VOLUME_DOES_NOT_EXIST", f"Volume '{'.'.join(parts)}' does not exist.")
            return self._volume_info(parts, "MANAGED", principal)  # type: ignore[arg-type]
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} /api/2.1/unity-catalog/volumes'")

    @staticmethod
    def _volume_info(name: tuple[str, str, str], kind: str, principal: Principal) -> dict[str, Any]:
        catalog, schema, volume = name
        return {
            "catalog_name": catalog,
            "schema_name": schema,
            "name": volume,
            "full_name": f"{catalog}.{schema}.{volume}",
            "volume_type": kind,
            "owner": principal.user_name,
            "storage_location": f"s3://fake-metastore/{catalog}/{schema}/{volume}",
        }

    # -- jobs -----------------------------------------------------------------------------------
    def _check_principal(self, entry: dict[str, Any]) -> None:
        """The Jobs and Permissions APIs' refusal of a `run_as` or ACL entry naming a user or service principal the
        workspace does not have (by `userName`; a service principal's is its application id)."""
        known = {"user_name": self.workspace.users(), "service_principal_name": self.workspace.service_principals()}
        words = {"user_name": "UserName", "service_principal_name": "ServicePrincipalName"}
        for key, names in known.items():
            if key in entry and entry[key] not in names:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Principal: {words[key]}({entry[key]}) does not exist")

    def _check_settings(self, settings: dict[str, Any]) -> None:
        """What the Jobs API refuses in a job's settings (the checks a bundle can trip on)."""
        self._check_principal(settings.get("run_as") or {})
        workspace = self.workspace
        clusters = {c.get("job_cluster_key"): c.get("new_cluster") or {} for c in settings.get("job_clusters") or []}
        specs = list(clusters.values()) + [t["new_cluster"] for t in settings.get("tasks") or [] if "new_cluster" in t]
        for spec in specs:
            node_type = spec.get("node_type_id")
            if node_type is not None and node_type not in NODE_TYPES[workspace.cloud]:
                raise ApiError(
                    400,
                    "INVALID_PARAMETER_VALUE",
                    f"Node type {node_type} is not supported. Supported node types: "
                    f"{', '.join(sorted(NODE_TYPES[workspace.cloud]))}",
                )
        for task in settings.get("tasks") or []:
            key = task.get("task_key")
            if task.get("job_cluster_key") and task["job_cluster_key"] not in clusters:
                raise ApiError(
                    400,
                    "INVALID_PARAMETER_VALUE",
                    f"Task {key} refers to job cluster key {task['job_cluster_key']}, which is not defined.",
                )
            if "notebook_task" in task and task.get("environment_key"):
                raise ApiError(
                    400,
                    "INVALID_PARAMETER_VALUE",
                    f"A task environment can not be provided for notebook task {key}. Please use the %pip magic "
                    "command to install notebook-scoped Python libraries and Python wheel packages",
                )

    def _job(self, job_id: Any) -> dict[str, Any]:
        found = self.workspace.jobs.get(int(job_id or 0))
        if found is None:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Job {job_id} does not exist.")
        return found

    def _jobs(self, action: str, args: dict[str, Any], principal: Principal) -> dict[str, Any]:
        workspace = self.workspace
        if action == "create" and self.command == "POST":
            settings = {key: value for key, value in args.items() if key not in ("access_control_list",)}
            self._check_settings(settings)
            job_id = next(workspace.ids)
            workspace.jobs[job_id] = {
                "job_id": job_id,
                "creator_user_name": principal.user_name,
                "created_time": int(time.time() * 1000),
                "settings": settings,
            }
            workspace.owners[("jobs", str(job_id))] = principal.user_name
            if args.get("access_control_list"):
                self._set_acl("jobs", str(job_id), args["access_control_list"], replace=True)
            return {"job_id": job_id}
        if action == "reset" and self.command == "POST":
            job = self._job(args.get("job_id"))
            self._check_settings(args.get("new_settings") or {})
            job["settings"] = args.get("new_settings") or {}
            return {}
        if action == "delete" and self.command == "POST":
            self._job(args.get("job_id"))
            del workspace.jobs[int(args["job_id"])]
            return {}
        if action == "get" and self.command == "GET":
            job = self._job(args.get("job_id"))
            run_as = job["settings"].get("run_as") or {}
            owner = workspace.owners[("jobs", str(job["job_id"]))]
            return {**job, "run_as_user_name": run_as.get("user_name") or run_as.get("service_principal_name") or owner}
        if action == "list" and self.command == "GET":
            listed = [job for job in workspace.jobs.values() if args.get("name") in (None, job["settings"].get("name"))]
            return {"jobs": listed, "has_more": False} if listed else {"has_more": False}
        if action == "run-now" and self.command == "POST":
            return self._run_now(self._job(args.get("job_id")), args)
        if action.startswith("runs/"):
            return self._runs(action[len("runs/") :], args)
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} jobs/{action}'")

    def _run_now(self, job: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        workspace = self.workspace
        settings = job["settings"]
        run_as = settings.get("run_as") or {}
        owner = workspace.owners[("jobs", str(job["job_id"]))]
        active = [r for r in workspace.runs.values() if r.job_id == job["job_id"] and r.end_time == 0]
        run_id = next(workspace.ids)
        task_runs = [
            {"run_id": next(workspace.ids), "task_key": task["task_key"], "state": {"life_cycle_state": "PENDING"}}
            for task in settings.get("tasks") or []
        ]
        run = Run(
            run_id,
            job["job_id"],
            1 + sum(r.job_id == job["job_id"] for r in workspace.runs.values()),
            json.loads(json.dumps(settings)),
            {str(k): str(v) for k, v in (args.get("notebook_params") or {}).items()},
            run_as.get("user_name") or run_as.get("service_principal_name") or owner,
            task_runs,
            start_time=int(time.time() * 1000),
        )
        workspace.runs[run_id] = run
        if len(active) >= int(settings.get("max_concurrent_runs", 1)):
            # Without a queue, the service skips a run that would exceed the job's concurrent runs.
            run.end_time = run.start_time
            run.state = {
                "life_cycle_state": "SKIPPED",
                "state_message": "Skipping this run because the limit of concurrent runs has been reached.",
            }
            return {"run_id": run_id, "number_in_job": run.number}
        threading.Thread(target=execute, args=(workspace, run), name=f"run-{run_id}", daemon=True).start()
        return {"run_id": run_id, "number_in_job": run.number}

    def _runs(self, action: str, args: dict[str, Any]) -> dict[str, Any]:
        workspace = self.workspace
        if action == "get" and self.command == "GET":
            return run_answer(workspace, self._run(args.get("run_id")), self.headers.get("Host", ""))
        if action == "get-output" and self.command == "GET":
            task_run_id = int(args.get("run_id") or 0)
            for run in workspace.runs.values():
                for task in run.task_runs:
                    if task["run_id"] == task_run_id:
                        return {"metadata": {**task, "job_id": run.job_id}, **run.outputs.get(task_run_id, {})}
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Run {task_run_id} does not exist.")
        if action == "cancel" and self.command == "POST":
            self._run(args.get("run_id"))
            return {}
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} jobs/runs/{action}'")

    def _run(self, run_id: Any) -> Run:
        found = self.workspace.runs.get(int(run_id or 0))
        if found is None:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Run {run_id} does not exist.")
        return found

    # -- permissions ----------------------------------------------------------------------------
    def _permissions(self, object_type: str, object_id: str, args: dict[str, Any], principal: Principal) -> dict:
        workspace = self.workspace
        if object_type == "jobs":
            self._job(object_id)
        elif not any(o.object_id == int(object_id) for o in workspace.objects.values() if o.object_type == "DIRECTORY"):
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Directory {object_id} does not exist.")
        if self.command in ("PUT", "PATCH"):
            self._set_acl(object_type, object_id, args.get("access_control_list") or [], self.command == "PUT")
        elif self.command != "GET":
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} permissions'")
        return self._acl_answer(object_type, object_id)

    def _set_acl(self, object_type: str, object_id: str, entries: list[dict[str, Any]], replace: bool) -> None:
        workspace = self.workspace
        levels = JOB_PERMISSION_LEVELS if object_type == "jobs" else DIRECTORY_PERMISSION_LEVELS
        owners = []
        for entry in entries:
            if entry.get("permission_level") not in levels:
                raise ApiError(
                    400, "INVALID_PARAMETER_VALUE", f"Permission level {entry.get('permission_level')} is not valid."
                )
            self._check_principal(entry)
            if "group_name" in entry and entry["group_name"] not in workspace.groups | {"users", "admins"}:
                raise ApiError(
                    400, "INVALID_PARAMETER_VALUE", f"Principal: GroupName({entry['group_name']}) does not exist"
                )
            if entry.get("permission_level") == "IS_OWNER":
                if "group_name" in entry:
                    raise ApiError(400, "INVALID_PARAMETER_VALUE", "A group cannot be the owner of a job.")
                owners.append(entry.get("user_name") or entry.get("service_principal_name"))
        if len(owners) > 1:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "The job must have exactly one owner.")
        key = (object_type, object_id)
        kept = [] if replace else workspace.acls.get(key, [])
        if owners:
            workspace.owners[key] = owners[0]
        workspace.acls[key] = kept + [entry for entry in entries if entry.get("permission_level") != "IS_OWNER"]

    def _acl_answer(self, object_type: str, object_id: str) -> dict[str, Any]:
        key = (object_type, object_id)
        entries = []
        owner = self.workspace.owners.get(key)
        if owner is not None:
            kind = "service_principal_name" if owner in self.workspace.service_principals() else "user_name"
            entries.append({kind: owner, "all_permissions": [{"permission_level": "IS_OWNER", "inherited": False}]})
        for entry in self.workspace.acls.get(key, []):
            who = {k: v for k, v in entry.items() if k != "permission_level"}
            entries.append({**who, "all_permissions": [{"permission_level": entry["permission_level"]}]})
        return {
            "object_id": f"/{object_type}/{object_id}",
            "object_type": object_type[:-1],
            "access_control_list": entries,
        }


def run_answer(workspace: Workspace, run: Run, host: str) -> dict[str, Any]:
    """The `runs/get` answer of a run."""
    with_url = f"http://{host}/?o=1#job/{run.job_id}/run/{run.run_id}"
    answer: dict[str, Any] = {
        "job_id": run.job_id,
        "run_id": run.run_id,
        "number_in_job": run.number,
        "run_name": run.settings.get("name", ""),
        "run_type": "JOB_RUN",
        "creator_user_name": run.run_as,
        "run_as_user_name": run.run_as,
        "state": dict(run.state),
        "start_time": run.start_time,
        "run_page_url": with_url,
        "tasks": [
            {**task, "state": dict(task["state"]), "run_page_url": f"{with_url}/task/{task['run_id']}"}
            for task in run.task_runs
        ],
    }
    if run.end_time:
        answer["end_time"] = run.end_time
    return answer


def resolve(workspace: Workspace, value: str) -> str:
    """A parameter value as the cluster sees it: a volume path on this disk, a table name as its location."""
    if value.startswith("/Volumes/"):
        workspace.in_volume(value, file=False)  # a volume that does not exist fails the run, as on a cluster
        return str(workspace.local(value))
    return workspace.tables.get(value, value)


def execute(workspace: Workspace, run: Run) -> None:
    """Run the job's tasks one after another on this machine; record each task's state and output."""
    tasks = {task["task_key"]: task for task in run.settings.get("tasks") or []}
    run.state = {"life_cycle_state": "RUNNING", "state_message": ""}
    failed = ""
    for task_run in run.task_runs:
        task = tasks[task_run["task_key"]]
        if failed:
            task_run["state"] = {"life_cycle_state": "SKIPPED", "state_message": "An upstream task failed."}
            continue
        task_run["state"] = {"life_cycle_state": "RUNNING", "state_message": ""}
        try:
            result = execute_notebook_task(workspace, run, task)
        except TaskFailed as err:
            failed = f"Task {task['task_key']} failed with message: {err}"
            task_run["state"] = {"life_cycle_state": "TERMINATED", "result_state": "FAILED", "state_message": str(err)}
            run.outputs[task_run["run_id"]] = {"error": str(err), "error_trace": err.trace}
            continue
        task_run["state"] = {"life_cycle_state": "TERMINATED", "result_state": "SUCCESS", "state_message": ""}
        run.outputs[task_run["run_id"]] = {"notebook_output": {"result": result, "truncated": False}}
    run.end_time = int(time.time() * 1000)
    run.state = (
        {"life_cycle_state": "TERMINATED", "result_state": "FAILED", "state_message": failed}
        if failed
        else {"life_cycle_state": "TERMINATED", "result_state": "SUCCESS", "state_message": ""}
    )


class TaskFailed(Exception):
    """A task run that did not succeed; `trace` is the end of its output."""

    def __init__(self, message: str, trace: str = "") -> None:
        super().__init__(message)
        self.trace = trace


def execute_notebook_task(workspace: Workspace, run: Run, task: dict[str, Any]) -> str:
    """Run one notebook task with notebooks/run_local.py; the notebook's exit value."""
    notebook = task.get("notebook_task")
    if notebook is None:
        raise TaskFailed(f"Task {task['task_key']}: only notebook tasks run here.")
    with workspace.lock:
        try:
            path = workspace_path(notebook["notebook_path"])
        except ApiError as err:
            raise TaskFailed(err.message) from None
        found = workspace.objects.get(path)
    if found is None or found.object_type != "NOTEBOOK":
        raise TaskFailed(f'Unable to access the notebook "{notebook["notebook_path"]}" in the workspace.')
    parameters = {**(notebook.get("base_parameters") or {}), **run.notebook_params}
    try:
        widgets = {name: resolve(workspace, str(value)) for name, value in parameters.items()}
    except ApiError as err:
        raise TaskFailed(err.message) from None
    classic = bool(task.get("job_cluster_key") or task.get("new_cluster") or task.get("existing_cluster_id"))
    with tempfile.TemporaryDirectory(prefix="fake-run-") as folder:
        source = Path(folder) / (os.path.basename(path) + ".py")
        source.write_bytes(found.content)
        argv = [sys.executable, workspace.runner, str(source), "--venv", workspace.runner_venv]
        argv += ["--access-mode", "classic" if classic else "serverless"]
        for name, value in widgets.items():
            argv += ["--widget", f"{name}={value}"]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("DATABRICKS_")}
        done = subprocess.run(argv, capture_output=True, text=True, env=environment, cwd=folder, check=False)
    output = done.stdout + done.stderr
    with open(Path(workspace.runner_venv).parent / f"run-{run.run_id}.log", "w", encoding="utf-8") as log:
        log.write(" ".join(argv) + "\n" + output)
    if done.returncode != 0:
        raise TaskFailed(f"The notebook {path} failed (exit status {done.returncode}).", output[-4000:])
    results = [line[len(EXIT_MARKER) :] for line in done.stdout.splitlines() if line.startswith(EXIT_MARKER)]
    return results[-1] if results else ""


class Server(fake_databricks.FakeDatabricksServer):
    """The workspace's HTTP server."""


def pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def main(argv: list[str]) -> None:
    """Parse the command line and serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("root", type=Path)
    parser.add_argument("--user", type=pair, action="append", default=[], help="TOKEN=EMAIL")
    parser.add_argument("--service-principal", type=pair, action="append", default=[], help="TOKEN=APPLICATION_ID")
    parser.add_argument("--group", type=pair, action="append", default=[], help="NAME=MEMBER,MEMBER")
    parser.add_argument("--volume", type=fake_databricks.volume_name, action="append", default=[])
    parser.add_argument("--schema", action="append", default=[], help="catalog.schema (volumes may be created in)")
    parser.add_argument("--table", type=pair, action="append", default=[], help="catalog.schema.table=DELTA_PATH")
    parser.add_argument("--cloud", choices=sorted(NODE_TYPES), default="aws")
    parser.add_argument("--notebook-runner", required=True, help="notebooks/run_local.py")
    parser.add_argument("--runner-venv", required=True, help="the kept virtualenv the notebooks run in")
    options = parser.parse_args(argv)
    for name, default in (("upload_style", "multipart"), ("page_size", 1000), ("throttle", 0.0)):
        setattr(options, name, default)
    options.retry_after, options.max_concurrent, options.max_per_second, options.request_log = 1, 0, 0, None
    options.root.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(options.root, options)
    storage = Server(0, workspace, "storage", Handler)
    workspace.storage_host = f"127.0.0.1:{storage.server_address[1]}"
    threading.Thread(target=storage.serve_forever, name="storage", daemon=True).start()
    server = Server(options.port, workspace, "workspace", Handler)
    print(f"fake_workspace listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
