"""`cp SRC DST` / `sync SRC DST`: copy a dataset between any two stores, in parallel, resumably, verified.

The files the source index names (and `mds_conversion.json`) are copied in parallel; a file already at the
destination with the right size (and, on a local destination, the right hashes) is skipped, so an interrupted
copy resumes where it stopped. Each copied file is checked against the index's size and hashes before it is
uploaded, and its size is checked again after. The index is written last, so readers of DST never see a
dataset that is not complete. `sync` also deletes the destination's files that the new index does not name,
after the index is in place.
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streaming.cli.console import OK, emit, human_bytes, progress
from streaming.format.index import METADATA_BASENAME, read_index, stored_files
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.scratch import make_scratch, remove_scratch

EXAMPLES = """\
examples:
  mds-streaming cp s3://bucket/ds /local_disk/ds
  mds-streaming cp /data/ds gs://bucket/ds --jobs 32
  mds-streaming sync s3://bucket/ds abfss://c@account.dfs.core.windows.net/ds   # also delete extra files at DST
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    for name, help_text in (
        ("cp", "copy a dataset between any two stores (parallel, resumable, verified, index last)"),
        ("sync", "like cp, then delete the destination's files the new index does not name"),
    ):
        parser = commands.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=__doc__,
            epilog=EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("src", help="source dataset root, any URL")
        parser.add_argument("dst", help="destination dataset root, any URL")
        parser.add_argument("--jobs", type=int, default=16, help="files copied in parallel (default 16)")
        parser.set_defaults(run=run, delete_extra=name == "sync")


def _hashes_match(data: bytes, hashes: dict[str, str]) -> bool:
    from streaming.format.hashing import get_hash

    return all(get_hash(algo, data) == digest for algo, digest in hashes.items())


def _present_and_matching(dst: DatasetRoot, name: str, size: int | None, hashes: dict[str, str]) -> int | None:
    """The size of the destination's copy of ``name`` when it is already right, else None.

    A local destination's copy is read through its folder (a regular file, no link) and its hashes checked.
    """
    present = dst.size(name)
    if present is None or (size is not None and present != size):
        return None
    if dst.is_local and hashes and not _hashes_match(dst.tree.read_bytes(name, present), hashes):
        return None
    return present


def copy_file(src: DatasetRoot, dst: DatasetRoot, info: dict[str, Any]) -> tuple[str, int]:
    """Copy one file unless it is already there; returns `("copied" | "skipped", bytes)`.

    The source file is copied to a private scratch folder first (a local source through its folder: a regular
    file, never a link's target), bounded by the index's size, and checked there; the destination is written
    through its own folder (`DatasetRoot`: no link below it is followed).
    """
    name, size, hashes = info["basename"], info.get("bytes"), info.get("hashes") or {}
    present = _present_and_matching(dst, name, size, hashes)
    if present is not None:
        return "skipped", present
    scratch = make_scratch("mds-cp-")
    try:
        path = src.fetch(name, scratch, size)
        actual = os.path.getsize(path)
        if size is not None and actual != size:
            raise ValueError(
                f"{src.child(name)} is {actual} bytes but the source index says {size}; the source is damaged: "
                f"check it with `mds-streaming verify {src.url}`."
            )
        with open(path, "rb") as stream:
            matches = not hashes or _hashes_match(stream.read(), hashes)
        if not matches:
            raise ValueError(
                f"{src.child(name)} does not match the hashes its index records; the source is damaged: check it "
                f"with `mds-streaming verify {src.url}`."
            )
        dst.storage.put(path, dst.child(name))
        copied = dst.size(name)
        if copied != actual:
            raise OSError(f"{dst.child(name)} holds {copied} bytes after the upload, expected {actual}; run cp again.")
        return "copied", actual
    finally:
        remove_scratch(scratch)


def run(args: argparse.Namespace) -> int:
    from streaming.format.index import get_index_basename

    src = DatasetRoot(args.src)
    dst = DatasetRoot(args.dst)
    if src.url == dst.url:
        from streaming.cli.console import UsageError

        raise UsageError(f"SRC and DST are the same place ({src.url}); give another destination.")
    shards = read_index(src)
    files = [info for shard in shards for info in stored_files(shard)]
    metadata_size = src.size(METADATA_BASENAME)
    if metadata_size is not None:
        files.append({"basename": METADATA_BASENAME, "bytes": metadata_size, "hashes": {}})
    counts = {"copied": 0, "skipped": 0}
    moved = 0
    with ThreadPoolExecutor(max(1, args.jobs), thread_name_prefix="mds-cp") as pool:
        results = pool.map(lambda info: copy_file(src, dst, info), files)
        for outcome, size in progress(args, results, total=len(files), unit="files", desc=args.command):
            counts[outcome] += 1
            moved += size if outcome == "copied" else 0
    index_name = get_index_basename()
    dst.write_bytes(index_name, src.read_bytes(index_name))
    deleted = []
    if args.delete_extra:
        wanted = {info["basename"] for info in files} | {index_name}
        deleted = [name for name in dst.list_relative() if name not in wanted]
        dst.delete(deleted)
    document = {
        "src": src.url,
        "dst": dst.url,
        "files": len(files),
        "copied": counts["copied"],
        "skipped": counts["skipped"],
        "bytes_copied": moved,
        "deleted": deleted,
    }
    text = (
        f"{src.url} -> {dst.url}: {counts['copied']} file(s) copied ({human_bytes(moved)}), "
        f"{counts['skipped']} already there, index written last"
        + (f"; deleted {len(deleted)} extra file(s)" if deleted else "")
    )
    emit(args, document, text)
    return OK
