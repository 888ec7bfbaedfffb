"""What `make dist` publishes: the sdist and the wheel built from it, each with LICENSE and NOTICE and the license
in its metadata; a copy installed from the wheel names that wheel in its install hints; the release workflow
publishes a tag with trusted publishing."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

from streaming._version import DISTRIBUTION_VERSION

REPO = Path(__file__).resolve().parents[2]
# Two isolated builds (setuptools fetched from the package index) and a virtualenv: about 40 s, in the core lane.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The sdist and the wheel of this checkout, as `make dist` builds them (the wheel from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out


def test_the_wheel_holds_the_license_and_the_notice(built):
    wheel = built / f"mds_streaming-{DISTRIBUTION_VERSION}-py3-none-any.whl"
    info = f"mds_streaming-{DISTRIBUTION_VERSION}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        assert archive.read(f"{info}/licenses/NOTICE") == (REPO / "NOTICE").read_bytes()
        metadata = archive.read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert {"License-File: LICENSE", "License-File: NOTICE"} <= set(metadata.splitlines())


def test_the_sdist_holds_the_license_and_the_notice(built):
    sdist = built / f"mds_streaming-{DISTRIBUTION_VERSION}.tar.gz"
    with tarfile.open(sdist) as archive:
        for name in ("LICENSE", "NOTICE"):
            member = archive.extractfile(f"mds_streaming-{DISTRIBUTION_VERSION}/{name}")
            assert member is not None and member.read() == (REPO / name).read_bytes()


def test_the_license_is_the_apache_license_pyproject_declares():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith(" " * 33 + "Apache License\n" + " " * 27 + "Version 2.0, January 2004\n")
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    assert 'license = "Apache-2.0"' in (REPO / "pyproject.toml").read_text()


def test_a_copy_installed_from_the_wheel_names_the_wheel_in_its_install_hints(built, core_python, tmp_path):
    # A virtualenv holding the wheel alone, its dependencies seen through the core virtualenv's packages.
    target = tmp_path / "venv"
    venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    wheel = built / f"mds_streaming-{DISTRIBUTION_VERSION}-py3-none-any.whl"
    # No PYTHONPATH: with the checkout on it, pip would take its build metadata for an installed mds-streaming.
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", str(wheel)],
        check=True,
        timeout=300,
        env=environment,
    )
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    ours = subprocess.run([str(python), "-c", purelib], capture_output=True, text=True, check=True).stdout.strip()
    theirs = subprocess.run([str(core_python), "-c", purelib], capture_output=True, text=True, check=True)
    Path(ours, "zz_core.pth").write_text(theirs.stdout)
    run = subprocess.run(
        [str(python), "-c", "from streaming import StreamingDataset"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=120,
    )
    assert run.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: StreamingDataset needs 'torch', which is not installed. "
        f'Install it with: pip install "{wheel}[torch]"'
    )


def test_the_release_workflow_publishes_a_tag_with_trusted_publishing():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers == {"push": {"tags": ["v*"]}}
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    assert {"run": "make dist", "name": "Build and check the sdist and the wheel"} in build["steps"]
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    assert publish["steps"][-1] == {"uses": "pypa/gh-action-pypi-publish@release/v1"}
    assert workflow["permissions"] == {}
    assert not any("password" in str(step) or "token" in str(step.get("with", "")) for step in publish["steps"])


def test_make_dist_checks_what_it_built_with_twine():
    makefile = (REPO / "Makefile").read_text()
    assert "twine check --strict dist/*.tar.gz dist/*.whl" in makefile
    assert '"twine==' in (REPO / "pyproject.toml").read_text()
