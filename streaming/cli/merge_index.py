"""`merge-index ROOT [INDEX ...]`: combine sub-datasets' `index.json` files into one index at ROOT.

Both forms of `streaming.format.merge.merge_index`: with no INDEX, every `index.json` below ROOT is merged; with
INDEX arguments (index files or their folders, any URL), those are merged into ROOT. Shard paths are
rewritten relative to ROOT, so the merged dataset reads its parts where they are.
"""

from __future__ import annotations

import argparse
from typing import Any

from streaming.cli.console import OK, counted, dataset_folder, emit

EXAMPLES = """\
examples:
  mds-streaming merge-index s3://bucket/ds                         # every index.json below ds/
  mds-streaming merge-index /data/ds /data/ds/part-0 /data/ds/part-1/index.json
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "merge-index",
        parents=[common],
        help="merge sub-datasets' index.json files into one index",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("root", help="where the merged index.json is written, any URL")
    parser.add_argument("indexes", nargs="*", help="index files or folders to merge (default: all below ROOT)")
    parser.add_argument("--download-timeout", type=float, default=60, help="seconds per index download")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.format.index import read_index
    from streaming.format.merge import merge_index
    from streaming.storage.dataset_root import DatasetRoot
    from streaming.storage.out_argument import normalize_root

    root = normalize_root(dataset_folder(args.root, "merge-index"))
    if args.indexes:
        merge_index([normalize_root(i) for i in args.indexes], root, download_timeout=args.download_timeout)
    else:
        merge_index(root, download_timeout=args.download_timeout)
    shards = read_index(DatasetRoot(root))
    samples = sum(int(s["samples"]) for s in shards)
    document = {"root": root, "shards": len(shards), "samples": samples}
    emit(args, document, f"wrote {root}/index.json: {counted(len(shards), 'shard')}, {counted(samples, 'sample')}")
    return OK
