"""The layering docs/architecture.md describes holds: no module imports from a package above its own.

Every ``import`` and ``from … import`` of ``streaming`` (inside functions too: lazy imports are imports) is read
with ``ast``; a package may import only from the packages its row of ``MAY_IMPORT`` names. A new top-level package
fails here until it gets a row, and the architecture page a line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.docs.pages import REPO

#: Modules every layer may use; they import nothing of the package themselves.
FOUNDATION = {"util", "_version", "_extras"}
#: Top-level package (or module) of ``streaming`` → the ones it may import from, besides itself and FOUNDATION.
MAY_IMPORT = {
    **{name: set() for name in FOUNDATION},
    "storage": set(),
    "format": {"storage"},
    "dataset": {"format", "storage"},
    "convert": {"format", "storage"},
    "spark": {"convert", "format", "storage"},
    "cli": {"convert", "dataset", "format", "spark", "storage"},
    "compat": {"dataset", "format", "spark", "storage"},
    "base": {"compat", "dataset", "format", "spark", "storage"},
    "text": {"dataset", "storage"},
    "vision": {"dataset", "storage"},
    "multimodal": {"dataset", "storage"},
    "__init__": {"dataset"},
    "__main__": {"cli"},
}


def _layer(path: Path) -> str:
    relative = path.relative_to(REPO / "streaming").parts
    return relative[0] if len(relative) > 1 else relative[0].removesuffix(".py")


def _imported(path: Path) -> set[str]:
    """The top-level ``streaming`` packages (or modules) that ``path`` imports from."""
    package = path.relative_to(REPO).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            names = [".".join([*base, *([node.module] if node.module else [])])]
        else:
            continue
        found |= {name.split(".")[1] for name in names if name.startswith("streaming.")}
    return found


def test_no_module_imports_from_a_layer_above_its_own():
    wrong = []
    for path in sorted((REPO / "streaming").rglob("*.py")):
        layer = _layer(path)
        assert layer in MAY_IMPORT, (
            f"streaming/{layer} is not in MAY_IMPORT: give it a row here and a line in docs/architecture.md"
        )
        allowed = MAY_IMPORT[layer] | FOUNDATION | {layer}
        wrong += [f"{path.relative_to(REPO)} imports streaming.{name}" for name in _imported(path) - allowed]
    assert not wrong, "imports against the layering of docs/architecture.md:\n" + "\n".join(wrong)


def test_the_import_reader_sees_relative_and_lazy_imports():
    module = REPO / "streaming" / "format" / "writer.py"
    assert {"storage", "format", "util"} <= _imported(module)
