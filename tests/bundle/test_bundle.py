"""What the Databricks CLI does not check about the bundle (`bundle/`): that it installs this checkout's wheel, passes
the notebook's own widgets, and is the bundle the documentation shows.

The CLI's own rules (schema, sync root, production root path, development paths) and the Jobs API's answers are
checked by running the real CLI against the stand-in workspace (test_cli.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "bundle"
DOCS_PAGE = REPO / "docs" / "incremental-job.md"


def _root() -> dict[str, Any]:
    return yaml.safe_load((BUNDLE / "databricks.yml").read_text())


def _jobs() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pattern in _root()["include"]:
        for path in sorted(BUNDLE.glob(pattern)):
            found.update(yaml.safe_load(path.read_text())["resources"]["jobs"])
    return found


def _notebook_widgets(path: Path) -> set[str]:
    return set(
        re.findall(r"dbutils\.widgets\.(?:text|dropdown|combobox|multiselect)\(\s*\"([^\"]+)\"", path.read_text())
    )


def _wheel_name() -> str:
    """The file name of the wheel `make` (and the bundle's artifact build) makes from this checkout."""
    version = re.search(r'DISTRIBUTION_VERSION = "([^"]+)"', (REPO / "streaming" / "_version.py").read_text())
    assert version is not None
    return f"mds_streaming-{version.group(1)}-py3-none-any.whl"


def test_the_bundle_installs_the_wheel_it_builds():
    """The `install` default names the wheel of this checkout's version, in the folder the CLI uploads it to."""
    root = _root()
    (artifact,) = root["artifacts"].values()
    assert artifact["type"] == "whl" and (BUNDLE / artifact["path"] / "pyproject.toml").is_file()
    assert root["variables"]["install"]["default"] == "${workspace.artifact_path}/.internal/" + _wheel_name(), (
        "the bundle's `install` default names another version than streaming/_version.py's"
    )
    for job in _jobs().values():
        assert job["tasks"][0]["notebook_task"]["base_parameters"]["install"] == "${var.install}"


def test_the_parameters_are_the_notebooks_widgets():
    for key, job in _jobs().items():
        for task in job["tasks"]:
            notebook = (BUNDLE / "resources" / task["notebook_task"]["notebook_path"]).resolve()
            unknown = set(task["notebook_task"]["base_parameters"]) - _notebook_widgets(notebook)
            assert not unknown, f"{key}: parameters {sorted(unknown)} are no widgets of {notebook.name}"


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


@pytest.mark.parametrize("notebook", sorted((REPO / "notebooks").glob("0*.py")), ids=lambda path: path.name)
def test_the_notebooks_install_this_checkouts_wheel_by_default(notebook):
    """mds-streaming is not on PyPI: the `install` widget's default is the wheel `make` builds, on a volume."""
    default = re.search(r'dbutils\.widgets\.text\(\s*"install",\s*"([^"]+)"', notebook.read_text())
    assert default is not None, f"{notebook.name} has no install widget"
    assert default.group(1).startswith("/Volumes/") and default.group(1).endswith("/" + _wheel_name())
