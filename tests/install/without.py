"""Run Python code as if some packages were not installed: ``python without.py PACKAGES CODE``.

PACKAGES is a comma-separated list of top-level modules; an import finder placed first on ``sys.meta_path`` answers
every import of them, or of a module inside them, with the ``ModuleNotFoundError`` a missing package gives. The test
virtualenv has every extra installed, so this is how a test meets a store, command or reader without its extra.
"""

from __future__ import annotations

import importlib.abc
import sys


class Without(importlib.abc.MetaPathFinder):
    """Finds nothing for the hidden packages, as if they were not installed."""

    def __init__(self, hidden: set[str]) -> None:
        self.hidden = hidden

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, Without(set(sys.argv[1].split(","))))
    code = sys.argv[2]
    sys.argv = ["without", *sys.argv[3:]]
    exec(compile(code, "<code>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the test's own code
