"""Check that a lane's interpreter holds its pins: `python tests/floor_versions.py CONSTRAINTS [EXTRA]`.

For every package pinned in CONSTRAINTS (`name==version` lines), the installed version must be the pinned one, and
the pin must lie on the line of the lowest version pyproject.toml declares for it (`numpy>=1.23` pins a 1.23.x): a
floor raised in pyproject.toml without the lane following it, or a pin pip could not keep, fails `make test` here.
With EXTRA, the floors are the ones that extra declares (the Spark 3.5 Delta lane pins the `delta` extra's, whose
pyarrow floor is above the `spark` extra's); without it, the lowest any part of pyproject.toml declares (the floor
lane). A pin whose line's comment starts with "above the floor:" (and says why) need only be at or above it.

`python tests/floor_versions.py CONSTRAINTS --runtime EXTRA,EXTRA...`: CONSTRAINTS are a Databricks runtime's own
versions (the Python 3.10 and 3.12 lanes), installed with those extras. Each must be installed as pinned and be at or
above every floor pyproject.toml's dependencies and those extras declare for it, so that installing the package
there upgrades nothing the runtime ships.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (the 3.10 lane): pytest depends on tomli there
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _version(text: str) -> tuple[int, ...]:
    return tuple(map(int, text.split(".")))


def declared_floors(extra: str | None = None, installed_extras: list[str] | None = None) -> dict[str, str]:
    """Package name -> the lowest `>=` version pyproject.toml declares for it (in ``extra``, else anywhere).

    With ``installed_extras``, the highest floor the dependencies and those extras declare (what an install of the
    package with those extras must satisfy).
    """
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    highest = installed_extras is not None
    if installed_extras is not None:
        requirements = list(project["dependencies"])
        for name in installed_extras:
            requirements += project["optional-dependencies"][name]
    elif extra is not None:
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
            pick = max if highest else min
            floors[name] = pick(floors.get(name, match[2]), match[2], key=_version)
    return floors


def main(constraints: str, extra: str | None = None, installed_extras: str | None = None) -> int:
    runtime = extra == "--runtime"
    if runtime:
        if not installed_extras:
            print("--runtime needs the extras the lane installs, e.g. --runtime spark,cli", file=sys.stderr)
            return 2
        floors = declared_floors(installed_extras=installed_extras.split(","))
        extra = None
    else:
        floors = declared_floors(extra)
    problems = []
    where = f" in its {extra} extra" if extra else ""
    for text in Path(constraints).read_text().splitlines():
        line, _, comment = (part.strip() for part in text.partition("#"))
        if not line:
            continue
        # A pin may stand above its floor only when its line says why (the floor runs in another lane).
        above_floor = comment.startswith("above the floor:")
        name, pinned = (part.strip() for part in line.split("=="))
        installed = version(name)
        floor = floors.get(name.lower())
        if installed != pinned:
            problems.append(f"{name}: {installed} installed, {pinned} pinned")
        if floor is None:
            problems.append(f"{name}: pinned, but pyproject.toml declares no floor for it{where}")
        elif runtime or above_floor:
            if _version(pinned) < _version(floor):
                problems.append(f"{name}: the runtime's {pinned} is below the >={floor} pyproject.toml declares")
        elif pinned.split(".")[: len(floor.split("."))] != floor.split("."):
            problems.append(f"{name}: {pinned} pinned, but pyproject.toml declares >={floor}{where}")
        print(f"{name:16} declared >={floor}  pinned {pinned}  installed {installed}")
    for problem in problems:
        print(f"{constraints}: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
