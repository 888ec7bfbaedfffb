"""The Databricks Asset Bundle of the scheduled job (``bundle/``) against the Jobs API as databricks-sdk defines it.

Each job of the bundle, with the bundle's variables filled in, must survive ``JobSettings.from_dict`` then
``as_dict`` unchanged (so no field is misspelt, misplaced or of the wrong shape: ``from_dict`` drops what the API
does not know) and follow the rules the API and the SDK's docstrings give for notebook tasks: no task environment on
a notebook task (the Jobs API answers "a task environment can not be provided for notebook task ... use the %pip
magic"), a cluster named by ``job_cluster_key`` that the job defines, an environment at the job level for serverless
tasks, parameters that are widgets of the notebook, and the notebook itself in the repository. The documentation
shows exactly these files (`test_the_documentation_shows_the_checked_files`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from databricks.sdk.service import compute, jobs

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "bundle"
DOCS_PAGE = REPO / "docs" / "incremental-job.md"
NOTEBOOK_SOURCE = "# Databricks notebook source"
_VARIABLE = re.compile(r"\$\{var\.([A-Za-z_][A-Za-z0-9_]*)\}")


def _bundle() -> tuple[dict[str, Any], dict[str, Path]]:
    """Every job of the bundle (variables filled in with their defaults) and the file that defines it."""
    root = yaml.safe_load((BUNDLE / "databricks.yml").read_text())
    variables = {name: spec["default"] for name, spec in root.get("variables", {}).items()}
    jobs_found: dict[str, Any] = {}
    files: dict[str, Path] = {}
    for pattern in root.get("include", []):
        for path in sorted(BUNDLE.glob(pattern)):
            for key, settings in (yaml.safe_load(path.read_text()).get("resources", {}).get("jobs") or {}).items():
                assert key not in jobs_found, f"job {key} is defined twice"
                jobs_found[key] = _fill(settings, variables)
                files[key] = path
    return jobs_found, files


def _fill(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        missing = [name for name in _VARIABLE.findall(value) if name not in variables]
        assert not missing, f"undefined bundle variable(s) {missing} in {value!r}"
        return _VARIABLE.sub(lambda match: str(variables[match.group(1)]), value)
    if isinstance(value, dict):
        return {key: _fill(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, variables) for item in value]
    return value


def _notebook_widgets(path: Path) -> set[str]:
    return set(
        re.findall(r"dbutils\.widgets\.(?:text|dropdown|combobox|multiselect)\(\s*\"([^\"]+)\"", path.read_text())
    )


def problems(settings: dict[str, Any], defined_in: Path) -> list[str]:
    """What the Jobs API (as the SDK defines and documents it) would refuse in one job's settings."""
    found = []
    parsed = jobs.JobSettings.from_dict(settings)
    if parsed.as_dict() != settings:
        found.append(f"JobSettings.from_dict/as_dict changes the settings: {parsed.as_dict()} != {settings}")
    clusters = {cluster.job_cluster_key for cluster in parsed.job_clusters or []}
    environments = {environment.environment_key for environment in parsed.environments or []}
    for environment in parsed.environments or []:
        if not isinstance(environment.spec, compute.Environment) or not environment.spec.dependencies:
            found.append(f"environment {environment.environment_key} installs nothing")
    for task in parsed.tasks or []:
        notebook = task.notebook_task
        classic = task.job_cluster_key or task.new_cluster or task.existing_cluster_id
        if task.job_cluster_key and task.job_cluster_key not in clusters:
            found.append(f"task {task.task_key}: job_cluster_key {task.job_cluster_key!r} names no job cluster")
        if not classic and not environments and task.notebook_task is None:
            # A serverless notebook task runs in the notebook's own environment (and %pip); other tasks need one.
            found.append(f"task {task.task_key}: serverless tasks need an environment at the job level")
        if notebook is None:
            continue
        if task.environment_key is not None:
            found.append(
                f"task {task.task_key}: a task environment can not be provided for notebook task "
                f"{task.task_key}; use the %pip magic (or the job-level environment) instead"
            )
        source = (defined_in.parent / notebook.notebook_path).resolve()
        if notebook.notebook_path.startswith("/") or not source.is_file():
            found.append(f"task {task.task_key}: {notebook.notebook_path} is not a notebook of the repository")
            continue
        if not source.read_text().startswith(NOTEBOOK_SOURCE):
            found.append(f"task {task.task_key}: {source} is not a Databricks notebook source file")
        unknown = set(notebook.base_parameters or {}) - _notebook_widgets(source)
        if unknown:
            found.append(f"task {task.task_key}: parameters {sorted(unknown)} are no widgets of {source.name}")
        if not all(isinstance(value, str) for value in (notebook.base_parameters or {}).values()):
            found.append(f"task {task.task_key}: base_parameters values must be strings")
    if parsed.max_concurrent_runs != 1:
        found.append("max_concurrent_runs must be 1: one run per dataset at a time")
    return found


def test_both_jobs_are_what_the_jobs_api_accepts():
    found, files = _bundle()
    assert set(found) == {"mds_incremental", "mds_incremental_serverless"}
    for key, settings in found.items():
        assert problems(settings, files[key]) == [], key
    classic, serverless = found["mds_incremental"], found["mds_incremental_serverless"]
    assert classic["tasks"][0]["job_cluster_key"] == classic["job_clusters"][0]["job_cluster_key"]
    assert "environments" not in classic and "job_clusters" not in serverless
    # A notebook task takes no environment_key, so a job environment would install nothing: %pip does.
    assert "environments" not in serverless
    for settings in found.values():
        # The CLI uploads a built artifact to `<artifact_path>/.internal/`, a folder on the volume.
        expected = "${workspace.artifact_path}/.internal/" + _wheel_name()
        assert settings["tasks"][0]["notebook_task"]["base_parameters"]["install"] == expected
    for settings in found.values():
        (table,) = settings["trigger"]["table_update"]["table_names"]
        assert len(table.split(".")) == 3, "a table-update trigger names a Unity Catalog table"


def _root() -> dict[str, Any]:
    return yaml.safe_load((BUNDLE / "databricks.yml").read_text())


def _wheel_name() -> str:
    """The file name of the wheel `make` (and the bundle's artifact build) makes from this checkout."""
    version = re.search(r'DISTRIBUTION_VERSION = "([^"]+)"', (REPO / "streaming" / "_version.py").read_text())
    assert version is not None
    return f"mds_streaming-{version.group(1)}-py3-none-any.whl"


def test_the_bundle_builds_and_installs_this_checkouts_wheel():
    root = _root()
    (artifact,) = root["artifacts"].values()
    assert artifact["type"] == "whl" and (BUNDLE / artifact["path"] / "pyproject.toml").is_file()
    assert root["variables"]["install"]["default"].endswith("/.internal/" + _wheel_name()), (
        "the bundle's `install` default names another version than streaming/_version.py's"
    )
    assert root["workspace"]["artifact_path"].startswith("${var.artifact_volume}")
    assert root["variables"]["artifact_volume"]["default"].startswith("/Volumes/")


def test_every_notebook_lies_in_the_sync_root():
    """The CLI syncs the common folder of the bundle root and `sync.paths`; a notebook outside it is refused
    ("is not contained in sync root path")."""
    roots = [BUNDLE, *((BUNDLE / path).resolve() for path in _root().get("sync", {}).get("paths", []))]
    sync_root = Path(os.path.commonpath([str(root) for root in roots]))
    found, files = _bundle()
    for key, settings in found.items():
        for task in settings["tasks"]:
            notebook = (files[key].parent / task["notebook_task"]["notebook_path"]).resolve()
            assert notebook.is_relative_to(sync_root), f"{key}: {notebook} is outside the sync root {sync_root}"


def test_production_states_its_root_path_run_as_and_permissions():
    """The CLI refuses `mode: production` without `workspace.root_path` (one copy per target)."""
    prod = _root()["targets"]["prod"]
    assert prod["mode"] == "production"
    assert prod["workspace"]["root_path"].startswith("/Workspace/")
    assert set(prod["run_as"]) <= {"user_name", "service_principal_name"} and prod["run_as"]
    assert any(entry["level"] == "CAN_MANAGE" for entry in prod["permissions"])


def test_the_readme_bundle_the_jobs_api_refused_is_refused_here():
    """The bundle the README used to show: environment_key on a notebook task (the API's refusal, reproduced)."""
    refused = {
        "name": "mds-incremental",
        "max_concurrent_runs": 1,
        "tasks": [
            {
                "task_key": "append_to_mds",
                "notebook_task": {"notebook_path": "../../notebooks/03_incremental_job.py"},
                "environment_key": "default",
            }
        ],
        "environments": [{"environment_key": "default", "spec": {"environment_version": "4", "dependencies": ["x"]}}],
    }
    found = problems(refused, BUNDLE / "resources" / "job.yml")
    assert any("a task environment can not be provided for notebook task" in problem for problem in found)
    misspelt = {**refused, "tasks": [{"task_key": "t", "notebook_task": {"notebook_path": "x"}, "job_cluster": "c"}]}
    assert any("changes the settings" in problem for problem in problems(misspelt, BUNDLE / "resources" / "job.yml"))


def test_the_documentation_shows_the_checked_files():
    """Every YAML block of the job's page is one of the bundle's files, byte for byte (after its heading line)."""
    text = DOCS_PAGE.read_text()
    blocks = re.findall(r"```yaml\n# (bundle/[^\n]+)\n(.*?)```", text, re.S)
    shown = {name for name, _ in blocks}
    assert shown == {
        "bundle/databricks.yml",
        "bundle/resources/mds_incremental.yml",
        "bundle/resources/mds_incremental_serverless.yml",
    }
    for name, body in blocks:
        assert body == (REPO / name).read_text(), f"{DOCS_PAGE.name} shows a {name} that is not the checked one"


@pytest.mark.parametrize("name", ["table", "out", "install"])
def test_the_parameters_are_the_notebooks_widgets(name):
    assert name in _notebook_widgets(REPO / "notebooks" / "03_incremental_job.py")


@pytest.mark.parametrize("notebook", sorted((REPO / "notebooks").glob("0*.py")), ids=lambda path: path.name)
def test_the_notebooks_install_this_checkouts_wheel_by_default(notebook):
    """mds-streaming is not on PyPI: the `install` widget's default is the wheel `make` builds, on a volume."""
    default = re.search(r'dbutils\.widgets\.text\(\s*"install",\s*"([^"]+)"', notebook.read_text())
    assert default is not None, f"{notebook.name} has no install widget"
    assert default.group(1).startswith("/Volumes/") and default.group(1).endswith("/" + _wheel_name())
