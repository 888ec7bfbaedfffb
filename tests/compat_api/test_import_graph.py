"""The package's import graph, read from the source: no import circle, no private name taken from another module,
and the scheduled job's packages in their layers.

An edge is any ``import``/``from`` statement of a module, wherever it stands (a function's lazy import and a
``TYPE_CHECKING`` import count: a circle of annotations is still two modules that cannot be read one at a time).
``from package import name`` is an edge to the module ``package.name`` when that is a module, else to the package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "streaming"
#: Upstream's import paths re-export its private names (``_encodings``, ``_ShardState``…) by design.
RE_EXPORTS = "streaming.base"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(module: str) -> Iterator[tuple[str, str | None]]:
    """(the module imported, the name taken from it or None) for every import statement of ``module``."""
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("streaming"):
                    yield (alias.name if alias.name in MODULES else alias.name.rsplit(".", 1)[0]), None
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("streaming"):
            for alias in node.names:
                below = f"{node.module}.{alias.name}"
                yield (below, None) if below in MODULES else (str(node.module), alias.name)


GRAPH = {module: {target for target, _ in _imports(module) if target != module} for module in MODULES}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph and (c not in index or c in on_stack)), None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child in index:
                low[node] = min(low[node], index[child])
            else:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
    return found


def test_the_circle_finder_finds_a_circle():
    """The checker itself: a three-module circle and a self-contained tail."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere_in_the_package():
    circles = _circles(GRAPH)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(circle) for circle in circles)


def test_no_module_imports_another_module_s_private_name():
    """``from streaming.x import _y`` couples a module to another's insides; upstream's paths (`streaming.base`)
    re-export upstream's own private names and are exempt."""
    taken = [
        f"{module} imports {source}.{name}"
        for module in sorted(MODULES)
        if not module.startswith(RE_EXPORTS)
        for source, name in _imports(module)
        if name is not None and name.startswith("_") and not name.startswith("__") and source != module
    ]
    assert not taken, "\n".join(taken)


def _rooms(module: str) -> set[str]:
    """The rooms (``streaming.<room>``) a module imports."""
    return {target.split(".")[1] for target in GRAPH[module] if target.count(".") >= 1}


def _room_imports(room: str) -> set[str]:
    return {
        imported
        for module in MODULES
        if module == f"streaming.{room}" or module.startswith(f"streaming.{room}.")
        for imported in _rooms(module)
    } - {room}


def test_the_scheduled_job_sits_on_delta_convert_format_and_storage():
    """`incremental` is engine-neutral: it builds on the Delta reading below it and never reaches up into Spark."""
    assert _room_imports("incremental") <= {"delta", "convert", "format", "storage", "_extras"}
    assert {"delta", "convert", "format"} <= _room_imports("incremental")


def test_delta_reading_sits_below_the_job_and_the_conversion():
    """`delta` parses Delta logs and reads tables with delta-rs, knowing nothing of shards, conversions or jobs."""
    assert _room_imports("delta") <= {"format", "storage", "_extras"}
    users = {module.split(".")[1] for module in MODULES if any(t.startswith("streaming.delta") for t in GRAPH[module])}
    assert {"incremental", "convert", "spark"} <= users


def test_spark_sits_above_the_job_and_only_the_chosen_rooms_import_it():
    """Spark's reader builds on the job's interface; outside `spark/`, only upstream's re-exports, the command
    line's choice of the Spark engine (`convert`, `incremental`) and the upstream-compatible converter use it."""
    assert {"incremental", "delta", "convert"} <= _room_imports("spark")
    users = sorted(
        module
        for module in MODULES
        if not module.startswith("streaming.spark") and any(t.startswith("streaming.spark") for t in GRAPH[module])
    )
    allowed = {"streaming.cli.convert", "streaming.cli.incremental"}
    assert [
        user for user in users if user not in allowed and not user.startswith(("streaming.base", "streaming.compat"))
    ] == []


def test_the_job_reads_top_down_from_its_entry_point():
    """`streaming.incremental.job` is the package's one top: it reaches every module of the package by imports, no
    module imports it back, and the package's imports have no circle, so a reader following a run from the entry
    point goes down and never meets a module twice."""
    entry = "streaming.incremental.job"
    package = {module for module in MODULES if module.startswith("streaming.incremental.")}
    reached, frontier = {entry}, [entry]
    while frontier:
        for target in GRAPH[frontier.pop()] & package:
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == package, f"not reached from the entry point: {sorted(package - reached)}"
    assert [module for module in package if entry in GRAPH[module]] == []
    assert _circles({module: GRAPH[module] & package for module in package}) == []
