"""What the incremental job reads for a one-row change to a large column-mapped Delta table: files and bytes.

Builds a delta-rs table of ``--rows`` rows in ``--files`` data files with ``delta.columnMapping.mode`` ``name``
(the files hold physical column names), converts it once with `streaming.incremental.incremental_to_mds`, updates
one row (delta-rs rewrites the one file holding it), then runs the job again, in append mode and in mirror mode
(``key=["id"]``), counting every file the package opens of the table and the bytes it reads from them. The count
is taken in the filesystem layer the package reads a local table through (`streaming.storage.table_files`'s
`NoLinkFiles`, by descriptor), which every read of the table goes through since the snapshot is built from the
package's own replay of the log (before, delta-rs read the log itself to pin each version, outside this count: run
this script under ``strace -f -e trace=openat`` to count those). Run it on another checkout with
``PYTHONPATH=<checkout>`` to compare.

    python benchmarks/delta_change_cost.py [--rows 1000000] [--files 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from typing import Any

import pyarrow as pa
from incremental_cost import build

COLUMN_MAPPING = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}


class CountingFile:
    """A read-only file object that adds every byte read to ``counts``."""

    def __init__(self, inner: Any, counts: Counter, path: str) -> None:
        self.inner, self.counts, self.path = inner, counts, path
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read() if size is None or size < 0 else self.inner.read(size)
        self.counts[self._kind() + "_bytes"] += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.inner.seek(offset, whence)

    def tell(self) -> int:
        return self.inner.tell()

    def size(self) -> int:
        return self.inner.size()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True
        self.inner.close()

    def _kind(self) -> str:
        return "log" if self.path.strip("/").startswith("_delta_log") else "data"


def count_reads(counts: Counter, opened: set[str]) -> None:
    """Make every file the package opens of a local table count its opens and bytes into ``counts``."""
    from streaming.storage.table_files import NoLinkFiles

    plain = NoLinkFiles.open_input_file

    def counting(self: Any, path: str) -> Any:
        inner = plain(self, path)
        file = CountingFile(inner, counts, path)
        counts[file._kind() + "_opens"] += 1
        opened.add(path.strip("/"))
        return pa.PythonFile(file, mode="r")

    NoLinkFiles.open_input_file = counting  # type: ignore[method-assign]


def main() -> None:
    from deltalake import DeltaTable

    from streaming.incremental import incremental_to_mds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    folder = args.out or tempfile.mkdtemp(prefix="delta-change-cost-")
    table = os.path.join(folder, "table")
    try:
        build(table, args.rows, args.files, COLUMN_MAPPING)
        data_files = [
            os.path.join(folder_, name)
            for folder_, _, names in os.walk(table)
            if "_delta_log" not in folder_
            for name in names
            if name.endswith(".parquet")
        ]
        table_bytes = sum(os.path.getsize(path) for path in data_files)
        for mode in ("append", "mirror"):
            options = {"mode": mode, "key": ["id"]} if mode == "mirror" else {}
            incremental_to_mds(table, os.path.join(folder, mode), progress=False, **options)
        DeltaTable(table).update(predicate="id = 7", updates={"text": "'changed'"})
        counts: Counter = Counter()
        opened: set[str] = set()
        count_reads(counts, opened)
        report: dict[str, Any] = {
            "rows": args.rows,
            "data_files": len(data_files),
            "table_data_bytes": table_bytes,
            "streaming": __import__("streaming").__file__,
        }
        for mode in ("append", "mirror"):
            counts.clear()
            opened.clear()
            options = {"mode": mode, "key": ["id"]} if mode == "mirror" else {}
            started = time.perf_counter()
            result = incremental_to_mds(table, os.path.join(folder, mode), progress=False, **options)
            report[mode] = {
                "method": result.method,
                "samples_added": result.samples,
                "seconds": round(time.perf_counter() - started, 2),
                "data_files_opened": len([path for path in opened if not path.startswith("_delta_log")]),
                "data_opens": counts["data_opens"],
                "data_bytes_read": counts["data_bytes"],
                "log_opens": counts["log_opens"],
                "log_bytes_read": counts["log_bytes"],
            }
        print(json.dumps(report, indent=2))
    finally:
        if args.out is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
