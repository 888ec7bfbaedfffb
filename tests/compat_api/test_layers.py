"""The package's rooms and which way their imports go, read from the source itself.

Four layers import one way: `storage` ← `format` ← `dataset` and `convert` ← `spark` (the only room that needs
pyspark). `cli` and the dataset zoo sit on top. Upstream's import paths (`base`) only re-export, and what exists
only for them lives in `compat`, which no core room imports. An import here is an ``import``/``from`` statement
anywhere in a module, or a module named in a string (the lazy export tables and the storage registry).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "streaming"
CORE = ("storage", "format", "dataset", "delta", "convert", "incremental", "spark")
#: Room → the rooms it may import (itself always); the top-level helper modules are open to all.
ALLOWED = {
    "storage": set(),
    "format": {"storage"},
    "dataset": {"format", "storage", "delta", "convert"},
    "delta": {"format", "storage"},
    "convert": {"delta", "format", "storage"},
    "incremental": {"delta", "convert", "format", "storage"},
    "spark": {"incremental", "delta", "convert", "format", "storage"},
    "text": {"dataset", "format", "storage"},
    "vision": {"dataset", "format", "storage"},
    "multimodal": {"dataset", "format", "storage"},
    "compat": {"dataset", "format", "storage", "spark"},
    "cli": {"dataset", "format", "storage", "delta", "convert", "incremental", "spark"},
    "base": {"dataset", "format", "storage", "compat", "__init__"},
}
HELPERS = {"_extras", "_version", "util"}
_NAMED_MODULE = re.compile(r"^(streaming(?:\.\w+)+)(?::\w+)?$")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found[module].update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found[module].add(node.module)
                found[module].update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = _NAMED_MODULE.match(node.value)
                if match:
                    found[module].add(match.group(1))
    return {module: {name for name in names if name.startswith("streaming")} for module, names in found.items()}


IMPORTS = _imports()


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_room_imports_only_the_rooms_below_it():
    wrong = []
    for module, names in sorted(IMPORTS.items()):
        room = _room(module)
        if room not in ALLOWED:
            continue
        for name in sorted(names):
            target = _room(name)
            if target not in (room, *HELPERS, *ALLOWED[room]) and name != "streaming":
                wrong.append(f"{module} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_only_the_spark_room_reaches_inside_it():
    """Outside `spark/`, only the package's public names (``from streaming.spark import ...``) are used."""
    inside = [
        f"{module} imports {name}"
        for module, names in IMPORTS.items()
        if _room(module) != "spark"
        for name in names
        if name.startswith("streaming.spark.") and name.rsplit(".", 1)[0] != "streaming.spark"
    ]
    assert not inside, "\n".join(sorted(inside))


@pytest.mark.parametrize("room", ["storage", "format", "dataset", "convert"])
def test_no_core_module_exists_only_for_upstreams_paths(room):
    """Every module of a core room is used by this package itself, not only re-exported at upstream's paths."""
    modules = {module for module in IMPORTS if _room(module) == room and module != f"streaming.{room}"}
    unused = []
    for module in sorted(modules):
        users = {
            user
            for user, names in IMPORTS.items()
            if user != module and any(name == module or name.startswith(f"{module}.") for name in names)
        }
        if not {user for user in users if _room(user) not in ("base", "compat")}:
            unused.append(f"{module} (used by {sorted(users) or 'nothing'})")
    assert not unused, "\n".join(unused)


def test_base_only_re_exports():
    """`streaming/base/` holds upstream's import paths and no code of its own: no function or class bodies."""
    defined = []
    for path in (PACKAGE / "base").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in ("__getattr__", "__dir__"):
                defined.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert not defined, "\n".join(defined)


def _one_letter_apart(first: str, second: str) -> bool:
    if first == second or abs(len(first) - len(second)) > 1:
        return False
    if len(first) == len(second):
        return sum(a != b for a, b in zip(first, second)) == 1
    shorter, longer = sorted((first, second), key=len)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def test_no_two_module_names_are_one_letter_apart():
    """Names one letter apart that mean different things (``uploader``/``uploaders``) mislead a reader; upstream's own
    paths (``streaming/base/``, the dataset zoo) are kept as upstream spells them."""
    upstream = ("base", "text", "vision", "multimodal")
    names = sorted(
        {
            path.stem
            for path in PACKAGE.rglob("*.py")
            if path.stem != "__init__" and path.relative_to(PACKAGE).parts[0] not in upstream
        }
    )
    close = [
        f"{first} / {second}"
        for index, first in enumerate(names)
        for second in names[index + 1 :]
        if _one_letter_apart(first, second)
    ]
    assert not close, close
