"""The walk of the ``table`` argument from the incremental job's entry point: where it stays, and how often it climbs.

Traces one run of `streaming.incremental.incremental_to_mds` (``--mode`` append or mirror) over a small delta-rs
table after a one-row change, and records every call into the package that receives the table's path as an
argument: a *stay* (a function, counted once however often it is called), its *room* (the module), and a *climb back
up* where such a call's nearest caller that also received the table lies in a lower layer than the function called
(layers, top first: the entry point ``job``, the appliers ``append``/``mirror``, the rest of
``streaming.incremental``, ``streaming.convert``, ``streaming.delta``, ``streaming.format``, ``streaming.storage``).
Run it on another checkout with ``PYTHONPATH=<checkout>`` to compare.

    python benchmarks/table_walk.py [--mode append|mirror] [--show]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from typing import Any

import pyarrow as pa

LAYERS = (
    ("streaming.incremental.job",),
    ("streaming.incremental.append", "streaming.incremental.mirror"),
    ("streaming.incremental.",),
    ("streaming.convert.",),
    ("streaming.delta.",),
    ("streaming.format.",),
    ("streaming.storage.",),
)


def layer(module: str) -> int:
    for rank, prefixes in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix) for prefix in prefixes):
            return rank
    return len(LAYERS)


def walk(table: str, run: Any) -> list[tuple[tuple[str, str], tuple[str, str] | None]]:
    """Every call into ``streaming`` handed ``table``, in call order, with the nearest such call above it."""
    calls: list[tuple[tuple[str, str], tuple[str, str] | None]] = []
    frames: dict[int, tuple[str, str]] = {}

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("streaming."):
            return None
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(name) for name in names]
        if not any(isinstance(value, str) and value == table for value in values):
            return None
        caller, above = None, frame.f_back
        while above is not None and caller is None:
            caller, above = frames.get(id(above)), above.f_back
        frames[id(frame)] = (module, code.co_name)
        calls.append(((module, code.co_name), caller))
        return finished

    def finished(frame: Any, event: str, arg: Any) -> Any:
        if event == "return":
            frames.pop(id(frame), None)  # its id may name another frame later
        return finished

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return calls


def summary(calls: list[tuple[tuple[str, str], tuple[str, str] | None]]) -> dict[str, Any]:
    stays = list(dict.fromkeys(stay for stay, _ in calls))
    climbs = sorted(
        {
            f"{caller[0]}.{caller[1]} -> {stay[0]}.{stay[1]}"
            for stay, caller in calls
            if caller is not None and layer(stay[0]) < layer(caller[0])
        }
    )
    return {
        "stays": len(stays),
        "rooms": len({module for module, _ in stays}),
        "climbs_back_up": len(climbs),
        "climbs": climbs,
        "walk": [f"{module}.{function}" for module, function in stays],
    }


def main() -> None:
    from deltalake import DeltaTable, write_deltalake

    from streaming.incremental import incremental_to_mds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("append", "mirror"), default="append")
    parser.add_argument("--show", action="store_true", help="also list every stay")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="table-walk-")
    try:
        table, out = os.path.join(folder, "table"), os.path.join(folder, "out")
        ids = list(range(100))
        write_deltalake(table, pa.table({"id": pa.array(ids, pa.int64()), "text": [f"row {i}" for i in ids]}))
        options: dict[str, Any] = {"progress": False}
        if args.mode == "mirror":
            options.update(mode="mirror", key=["id"])
        incremental_to_mds(table, out, **options)
        DeltaTable(table).update(predicate="id = 7", updates={"text": "'changed'"})
        report = {"mode": args.mode, **summary(walk(table, lambda: incremental_to_mds(table, out, **options)))}
        if not args.show:
            report.pop("walk")
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
