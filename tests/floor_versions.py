"""Check that a lane's interpreter holds the floors: `python tests/floor_versions.py CONSTRAINTS [EXTRA]`.

For every package pinned in CONSTRAINTS (`name==version` lines), the installed version must be the pinned one, and
the pin must lie on the line of the lowest version pyproject.toml declares for it (`numpy>=1.23` pins a 1.23.x): a
floor raised in pyproject.toml without the lane following it, or a pin pip could not keep, fails `make test` here.
With EXTRA, the floors are the ones that extra declares (the Spark 3.5 Delta lane pins the `delta` extra's, whose
pyarrow floor is above the `spark` extra's); without it, the lowest any part of pyproject.toml declares (the floor
lane).
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def declared_floors(extra: str | None = None) -> dict[str, str]:
    """Package name -> the lowest `>=` version pyproject.toml declares for it (in ``extra``, else anywhere)."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    if extra is not None:
        requirements = list(project["optional-dependencies"][extra])
    else:
        requirements = list(project["dependencies"])
        for requirements_of_extra in project["optional-dependencies"].values():
            requirements += requirements_of_extra
    floors: dict[str, str] = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9.]+).*", requirement)
        if match:
            name = match[1].lower()
            floors[name] = min(floors.get(name, match[2]), match[2], key=lambda v: tuple(map(int, v.split("."))))
    return floors


def main(constraints: str, extra: str | None = None) -> int:
    floors = declared_floors(extra)
    problems = []
    where = f" in its {extra} extra" if extra else ""
    for line in Path(constraints).read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, pinned = (part.strip() for part in line.split("=="))
        installed = version(name)
        floor = floors.get(name.lower())
        if installed != pinned:
            problems.append(f"{name}: {installed} installed, {pinned} pinned")
        if floor is None:
            problems.append(f"{name}: pinned, but pyproject.toml declares no floor for it{where}")
        elif pinned.split(".")[: len(floor.split("."))] != floor.split("."):
            problems.append(f"{name}: {pinned} pinned, but pyproject.toml declares >={floor}{where}")
        print(f"{name:16} declared >={floor}  pinned {pinned}  installed {installed}")
    for problem in problems:
        print(f"{constraints}: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
