"""Hard-link one virtualenv's torch, with the CUDA libraries it pulls in, into another virtualenv.

PyPI's torch 2.13.0 for Linux is the CUDA build: torch, triton and the ``nvidia-*`` and ``cuda-*`` wheels unpack
to about 4.6 GB in every virtualenv, and the suite needs torch in five of them (the main lane, the floor lane, the
reference, the real clients and the demo). A CI machine with little free disk ran out of it while unpacking the
second copy. Linking the files of the first install stores them once; pip then finds torch installed at the pinned
version and leaves it. pip removes or replaces a file rather than writing into it, so an upgrade or an uninstall in
one virtualenv never changes another. Only these large distributions are linked: the small pure-Python ones torch
needs (sympy, jinja2, fsspec…) are left to each virtualenv's own pip and constraints.

Into a virtualenv of another Python version (the Python 3.10 and 3.12 lanes), only the wheels built for any Python
(tag ``py3-none-…``: the ``nvidia-*`` CUDA libraries, 2.7 GB of the 4.6) are linked; torch and triton are built per
CPython version, and that virtualenv's pip installs its own.

usage: python benchmarks/share_torch.py SOURCE_VENV TARGET_VENV
Does nothing (and says so) when SOURCE_VENV is missing or has no torch; copies a file when the two virtualenvs
are on different filesystems.
"""

from __future__ import annotations

import errno
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

#: The distributions worth sharing: torch itself and the compiled libraries of its CUDA build.
SHARED_NAMES = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


def site_packages(venv: Path) -> Path:
    """The virtualenv's purelib folder, asked of its own interpreter (its Python version names the folder)."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.check_output([str(venv / "bin" / "python"), "-c", code], text=True).strip())


def python_version(venv: Path) -> str:
    """The virtualenv's Python version, major.minor."""
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    return subprocess.check_output([str(venv / "bin" / "python"), "-c", code], text=True).strip()


def any_python(dist: importlib.metadata.Distribution) -> bool:
    """Whether the distribution's wheel was built for every Python version (all its tags ``py…-none-…``)."""
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    return bool(tags) and all(tag.startswith("py") and tag.split("-")[1] == "none" for tag in tags)


def shared_distributions(source: Path) -> Iterator[importlib.metadata.Distribution]:
    """torch's distribution and every installed one it requires, directly or not, whose name is in SHARED_NAMES."""
    found = {_normalized(dist.metadata["Name"]): dist for dist in importlib.metadata.distributions(path=[str(source)])}
    pending, seen = ["torch"], set()
    while pending:
        name = pending.pop()
        if name in seen or name not in found or not SHARED_NAMES.match(name):
            continue
        seen.add(name)
        dist = found[name]
        yield dist
        pending.extend(
            _normalized(re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0]) for requirement in dist.requires or ()
        )


def link_distribution(dist: importlib.metadata.Distribution, source: Path, target: Path) -> int:
    """Link every file the distribution's RECORD lists under site-packages; return how many bytes were shared."""
    shared = 0
    for record in dist.files or ():
        relative = Path(str(record))
        # Console scripts (../../../bin/…) name their own virtualenv's interpreter: pip needs none of them here.
        if relative.parts and relative.parts[0] == "..":
            continue
        origin, copy = source / relative, target / relative
        if not origin.is_file() or copy.exists():
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(origin, copy)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
            shutil.copy2(origin, copy)
        shared += origin.stat().st_size
    return shared


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("usage:")[1].strip(), file=sys.stderr)
        return 2
    source_venv, target_venv = (Path(arg).resolve() for arg in argv)
    has_python = (source_venv / "bin" / "python").exists()
    distributions = list(shared_distributions(site_packages(source_venv))) if has_python else []
    if not distributions:
        print(f"share_torch: no torch in {source_venv}; {target_venv} installs its own")
        return 0
    if python_version(source_venv) != python_version(target_venv):
        distributions = [dist for dist in distributions if any_python(dist)]
    source, target = site_packages(source_venv), site_packages(target_venv)
    shared = sum(link_distribution(dist, source, target) for dist in distributions)
    size = f"{len(distributions)} distributions ({shared / 2**30:.1f} GiB)"
    print(f"share_torch: {size} of {source_venv} linked into {target_venv}")
    return 0


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
