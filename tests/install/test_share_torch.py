"""benchmarks/share_torch.py: the virtualenvs of `make test` hold one copy of torch's files, as hard links.

Two real virtualenvs (no pip, for speed); the source holds distributions written as pip writes them (dist-info with
METADATA and RECORD): torch requiring an nvidia library and sympy. After the run the target's interpreter finds torch
and the library at their versions, their files are the source's inodes, and sympy (small, left to each virtualenv's
own pip) is not there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "share_torch.py"


def _site_packages(root: Path) -> Path:
    return next((root / "lib").glob("python3*/site-packages"))


def _install(
    site: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = (), tag: str = ""
) -> None:
    """A distribution as pip leaves it: its files, and a dist-info whose RECORD lists them (and a console script),
    with a WHEEL file naming ``tag`` when given."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    if tag:
        (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        *(f"Requires-Dist: {r}" for r in requires),
    ]
    (info / "METADATA").write_text("\n".join(metadata) + "\n")
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD", f"../../../bin/{name}-script"]
    (info / "RECORD").write_text("".join(f"{entry},,\n" for entry in record))


def test_torch_and_its_cuda_libraries_are_linked_and_nothing_else(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    for root in (source, target):
        venv.EnvBuilder(with_pip=False).create(root)
    site = _site_packages(source)
    _install(site, "torch", "2.13.0", {"torch/__init__.py": "VERSION = 1\n"}, ("nvidia-cublas==13.1", "sympy>=1.13"))
    _install(site, "nvidia-cublas", "13.1", {"nvidia/cublas/lib/libcublas.so": "ELF"})
    _install(site, "sympy", "1.14", {"sympy/__init__.py": ""})

    shared = subprocess.run(
        [sys.executable, str(SCRIPT), str(source), str(target)], capture_output=True, text=True, check=True
    )

    assert "2 distributions" in shared.stdout, shared.stdout
    copy = _site_packages(target)
    for relative in ("torch/__init__.py", "nvidia/cublas/lib/libcublas.so"):
        assert (copy / relative).stat().st_ino == (site / relative).stat().st_ino, relative
    assert not (copy / "sympy").exists()
    assert not list((target / "bin").glob("*-script"))
    found = subprocess.run(
        [
            str(target / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, torch; "
            "print(m.version('torch'), m.version('nvidia-cublas'), torch.VERSION)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.split() == ["2.13.0", "13.1", "1"]


def test_a_missing_source_leaves_the_target_to_its_own_pip(tmp_path):
    target = tmp_path / "target"
    venv.EnvBuilder(with_pip=False).create(target)
    shared = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "absent"), str(target)], capture_output=True, text=True, check=True
    )
    assert shared.stdout.startswith("share_torch: no torch in "), shared.stdout
    assert not list(_site_packages(target).glob("torch*"))


def _python_of_another_version() -> str:
    """An interpreter whose minor version differs from this one's (pyenv's 3.10 and 3.12 on the CI machine)."""
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for python in sorted(versions.glob("3.1[0-9].*/bin/python3")):
        if not python.parent.parent.name.startswith(mine + "."):
            return str(python)
    if os.environ.get("CI"):
        pytest.fail(f"CI needs a second Python 3 version in {versions} (the Python lanes run 3.10 and 3.12)")
    pytest.skip(f"no Python 3 other than {mine} in {versions}")


def test_into_another_python_only_the_wheels_built_for_any_python_are_linked(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    venv.EnvBuilder(with_pip=False).create(source)
    subprocess.run([_python_of_another_version(), "-m", "venv", "--without-pip", str(target)], check=True)
    site = _site_packages(source)
    cp = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    _install(
        site,
        "torch",
        "2.13.0",
        {"torch/__init__.py": "VERSION = 1\n"},
        ("nvidia-cublas==13.1", "triton==3.7.1"),
        f"{cp}-{cp}-manylinux_2_28_x86_64",
    )
    _install(site, "triton", "3.7.1", {"triton/__init__.py": ""}, tag=f"{cp}-{cp}-manylinux_2_27_x86_64")
    _install(
        site, "nvidia-cublas", "13.1", {"nvidia/cublas/lib/libcublas.so": "ELF"}, tag="py3-none-manylinux_2_27_x86_64"
    )

    shared = subprocess.run(
        [sys.executable, str(SCRIPT), str(source), str(target)], capture_output=True, text=True, check=True
    )

    assert "1 distributions" in shared.stdout, shared.stdout
    copy = _site_packages(target)
    library = "nvidia/cublas/lib/libcublas.so"
    assert (copy / library).stat().st_ino == (site / library).stat().st_ino
    assert not (copy / "torch").exists() and not (copy / "triton").exists()
    assert not list(copy.glob("torch-*.dist-info")) and not list(copy.glob("triton-*.dist-info"))
