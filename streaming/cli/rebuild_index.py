"""`rebuild-index URL`: reconstruct a lost or damaged `index.json` from the shard files themselves.

MDS shards carry their own header (sample count, offsets, and the writer's settings: columns, encodings,
compression, hashes, size limit); JSON/CSV/TSV/XSV shards carry the same in their `.meta` file. Each shard is
read (decompressed when only the compressed copy is stored), its header checked against its length, and its
entry rebuilt with sizes and hashes recomputed from the bytes. When a header's settings cannot be read,
`--columns name:encoding,...` supplies the MDS columns (the offsets still give the sample count). Shards are
ordered by folder, then by shard number. Truncated or unreadable shards are left out and listed (exit 1).
An existing valid index is only replaced with `--force`; a replaced index is kept as `index.json.bak`.

A dataset with a commit log (`_mds_log/`: written by `dataframe_to_mds` or kept by `incremental_to_mds`) gets its
index from the log's newest state instead: the shard files hold every version's shards, including those a mirror
run replaced (they stay until `vacuum`'s retention for readers of older versions), so a scan would bring removed
rows back. Every file the state names must be present; `--ignore-log` scans the files as for any other dataset.
"""

from __future__ import annotations

import argparse
import posixpath
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from streaming.cli.console import OK, PROBLEMS, UsageError, dataset_folder, emit, progress, table
from streaming.format import commit_log
from streaming.format.compression import OutputTooLargeError
from streaming.format.errors import ShardCorruptError
from streaming.format.hashing import get_hash
from streaming.format.index import (
    INDEX_BASENAME,
    MAX_SHARD_FILE_BYTES,
    METADATA_BASENAME,
    RAW_DATA,
    RAW_META,
    ZIP_DATA,
    ZIP_META,
    stored_files,
)
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.scratch import scratch as scratch_folder

EXAMPLES = """\
examples:
  mds-streaming rebuild-index /data/ds                   # index.json lost: rebuild it from the shards
  mds-streaming rebuild-index s3://bucket/ds --dry-run   # show what would be written
  mds-streaming rebuild-index /data/ds --force           # replace an index that exists (kept as index.json.bak)
  mds-streaming rebuild-index /data/ds --columns text:str,label:int64   # headers unreadable: give the columns
"""
_COMPRESSED = ("br", "bz2", "gz", "snappy", "zstd")
_SPLIT_FORMATS = ("json", "csv", "tsv", "xsv")


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "rebuild-index",
        parents=[common],
        help="reconstruct a lost or damaged index.json from the shard files",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", help="dataset root (the folder that should hold index.json), any URL")
    parser.add_argument("--columns", help="MDS columns when shard headers are unreadable: 'a:str,b:int64'")
    parser.add_argument("--force", action="store_true", help="replace an existing, valid index.json")
    parser.add_argument("--dry-run", action="store_true", help="print the rebuilt index summary, write nothing")
    parser.add_argument("--jobs", type=int, default=8, help="shards read in parallel (default 8)")
    parser.add_argument(
        "--ignore-log",
        action="store_true",
        help="scan the shard files even when a commit log names the dataset's shards (brings back replaced shards)",
    )
    parser.set_defaults(run=run)


def natural_key(path: str) -> list[Any]:
    """Sort key that orders `shard.2` before `shard.10` and folders before their contents."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def _split_compression(name: str) -> tuple[str, str | None]:
    """`shard.00000.mds.zstd` → (`shard.00000.mds`, `zstd`)."""
    stem, extension = posixpath.splitext(name)
    return (stem, extension[1:]) if extension[1:] in _COMPRESSED else (name, None)


def find_shards(listing: list[str]) -> list[dict[str, Any]]:
    """Group files into shards: `{format, data: (raw name, stored name), meta: (raw, stored) | None}`."""
    stored: dict[str, str] = {}
    for name in listing:
        raw, _ = _split_compression(name)
        if raw not in stored or name == raw:
            stored[raw] = name
    shards = []
    for raw, name in stored.items():
        extension = posixpath.splitext(raw)[1][1:]
        if extension == "mds":
            shards.append({"format": "mds", "data": (raw, name), "meta": None})
        elif extension in _SPLIT_FORMATS and raw + ".meta" in stored and posixpath.basename(raw) != METADATA_BASENAME:
            shards.append({"format": extension, "data": (raw, name), "meta": (raw + ".meta", stored[raw + ".meta"])})
    return sorted(shards, key=lambda shard: natural_key(shard["data"][0]))


def _columns_config(text: str) -> dict[str, Any]:
    from streaming.cli.convert import parse_columns
    from streaming.format.mds.encodings import get_mds_coder, is_mds_encoding

    columns = parse_columns(text) or {}
    for name, encoding in columns.items():
        if encoding is None or not is_mds_encoding(encoding):
            raise UsageError(f"--columns: column {name!r} needs a valid MDS encoding ('{name}:str'), got {encoding!r}.")
    names = sorted(columns)
    encodings = [str(columns[name]) for name in names]
    return {
        "column_names": names,
        "column_encodings": encodings,
        "column_sizes": [get_mds_coder(encoding).size for encoding in encodings],
    }


#: The most a header's JSON settings may take (a few hundred bytes in practice).
MAX_SETTINGS_BYTES = 1 << 20


@dataclass
class _Scanned:
    """One stored file of a shard, read through once: its raw header, raw size and the index records."""

    head: bytes
    size: int
    raw_info: dict[str, Any]
    zip_info: dict[str, Any] | None
    family: str | None


def _mds_bounds(head: bytes) -> tuple[int, int] | None:
    """``(file size, header size)`` an MDS data file declares, once ``head`` holds its count and offsets."""
    if len(head) < 4:
        return None
    end = 4 * (int.from_bytes(head[:4], "little") + 2)
    if end > MAX_SHARD_FILE_BYTES:
        raise ShardCorruptError(f"its header declares {end // 4 - 2} samples, more than any shard holds")
    if len(head) < end:
        return None
    first, last = int.from_bytes(head[4:8], "little"), int.from_bytes(head[end - 4 : end], "little")
    return last, max(end, min(first, last))


def _meta_bounds(head: bytes) -> tuple[int, int] | None:
    """``(largest file size, header size)`` of a ``.meta`` file (the whole file is its header)."""
    if len(head) < 4:
        return None
    bound = 4 * (int.from_bytes(head[:4], "little") + 2) + MAX_SETTINGS_BYTES
    return bound, bound


def _scan(
    location: DatasetRoot,
    raw: str,
    name: str,
    hashes: list[str],
    scratch: str,
    bounds: Callable[[bytes], tuple[int, int] | None] | int,
) -> _Scanned:
    """Read one stored file (decompressing it when its name says so) in pieces, keeping only its header.

    ``bounds`` is the raw size the shard declares, or a function finding it in the header (with the header's
    own size): decompression stops past it (`OutputTooLargeError`), so a small shard that expands without end
    costs at most what its header declares, and memory holds one piece and the header at a time.
    """
    from streaming.format.compression import iter_decompress
    from streaming.format.hashing import new_hasher

    _, family = _split_compression(name)
    path = location.fetch(name, scratch, MAX_SHARD_FILE_BYTES + (MAX_SHARD_FILE_BYTES >> 6))
    with open(path, "rb") as stream:
        stored = stream.read() if family is not None else b""
        pieces = (
            iter_decompress(family, stored, MAX_SHARD_FILE_BYTES) if family else iter(lambda: stream.read(1 << 20), b"")
        )
        raw_hashers = [(algo, new_hasher(algo)) for algo in hashes]
        limit, keep = (bounds, 0) if isinstance(bounds, int) else (MAX_SHARD_FILE_BYTES, MAX_SHARD_FILE_BYTES)
        head = bytearray()
        size = 0
        for piece in pieces:
            size += len(piece)
            if len(head) < keep:
                head += piece[: keep - len(head)]
                if not isinstance(bounds, int) and keep == MAX_SHARD_FILE_BYTES and (found := bounds(bytes(head))):
                    limit, keep = found
                    del head[keep:]
            if size > limit:
                raise OutputTooLargeError(f"{name} holds more than the {limit} bytes its header declares")
            for _, hasher in raw_hashers:
                hasher.update(piece)
    raw_info = {"basename": raw, "bytes": size, "hashes": {algo: hasher.hexdigest() for algo, hasher in raw_hashers}}
    zipped = None
    if family is not None:
        zipped = {"basename": name, "bytes": len(stored), "hashes": {a: get_hash(a, stored) for a in hashes}}
    return _Scanned(bytes(head), size, raw_info, zipped, family)


def rebuild_shard(
    location: DatasetRoot, found: dict[str, Any], columns: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    """`(index entry or None, problem or None, what was inferred rather than read)` for one shard."""
    from streaming.cli.shards import parse_header
    from streaming.format.hashing import check_hashes

    raw, name = found["data"]
    inferred = []
    meta = found["meta"] is not None
    with scratch_folder("mds-rebuild-") as scratch:
        try:
            head_raw, head_name = found["meta"] or found["data"]
            first = _scan(location, head_raw, head_name, [], scratch, _meta_bounds if meta else _mds_bounds)
            header = parse_header(first.head, head_name, meta=meta, size=first.size)
            family = first.family
            config = header.config
            if config is None or config.get("format") != found["format"]:
                if columns is None or found["format"] != "mds":
                    said = config.get("format") if config is not None else None
                    reason = header.config_error or f"its settings say format {said!r}"
                    return None, f"{head_name}: {reason}; pass --columns to give the MDS columns", []
                config = {"version": 2, "format": "mds", "compression": family, "hashes": [], "size_limit": None}
                config.update(columns)
                inferred.append(f"{head_name}: columns from --columns, compression from the file name")
            hashes = check_hashes(config.get("hashes") or [])
            entry: dict[str, Any] = {**config, "samples": header.samples}
            if meta:
                declared = int(header.offsets[-1])
                data = _scan(location, raw, name, hashes, scratch, declared)
                if data.size != declared:
                    return None, f"{name} is {data.size} bytes but its .meta says {declared}", []
                meta_scan = _scan(location, head_raw, head_name, hashes, scratch, first.size)
                entry.update(
                    {
                        RAW_DATA: data.raw_info,
                        ZIP_DATA: data.zip_info,
                        RAW_META: meta_scan.raw_info,
                        ZIP_META: meta_scan.zip_info,
                    }
                )
            else:
                data = _scan(location, raw, name, hashes, scratch, first.size)
                entry.update({RAW_DATA: data.raw_info, ZIP_DATA: data.zip_info})
            if family is not None and entry.get("compression") is None:
                entry["compression"] = family
                inferred.append(f"{name}: compression {family} from the file name")
            return entry, None, inferred
        except Exception as err:  # noqa: BLE001 - one bad shard is reported, the others are still rebuilt
            return None, f"{name}: {err}", []


def run(args: argparse.Namespace) -> int:
    from streaming.format.index import dumps_index, get_index_basename, parse_index

    location = DatasetRoot(dataset_folder(args.url, "rebuild-index"))
    columns = _columns_config(args.columns) if args.columns else None
    listing = location.list_relative()
    index_name = get_index_basename()
    previous = None
    if index_name in listing:
        previous = location.read_bytes(index_name)
        try:
            parse_index(previous, location.child(index_name))
            valid = True
        except ValueError:
            valid = False
        if valid and not args.force and not args.dry_run:
            raise UsageError(
                f"{location.child(index_name)} exists and is valid; check it with `mds-streaming verify "
                f"{location.url}`, or pass --force to replace it (the old one is kept as {index_name}.bak)."
            )
    if not args.ignore_log and any(name.startswith(f"{commit_log.LOG_FOLDER}/") for name in listing):
        return _from_log(args, location, set(listing), previous)
    found = find_shards(listing)
    if not found:
        raise FileNotFoundError(f"No shard files (*.mds, *.mds.<compression>, *.json + .meta, ...) in {location.url}.")
    with ThreadPoolExecutor(max(1, args.jobs), thread_name_prefix="mds-rebuild") as pool:
        results = list(
            progress(
                args,
                pool.map(lambda shard: rebuild_shard(location, shard, columns), found),
                total=len(found),
                unit="shards",
                desc="rebuild",
            )
        )
    entries = [entry for entry, _, _ in results if entry is not None]
    problems = [problem for _, problem, _ in results if problem is not None]
    inferred = [text for _, _, notes in results for text in notes]
    attempts = _duplicate_attempts([entry[RAW_DATA]["basename"] for entry in entries])
    if not args.dry_run and entries:
        if previous is not None:
            location.write_bytes(index_name + ".bak", previous)
        location.write_bytes(index_name, dumps_index(entries).encode("utf-8"))
    document = {
        "root": location.url,
        "written": bool(entries) and not args.dry_run,
        "shards": len(entries),
        "samples": sum(entry["samples"] for entry in entries),
        "skipped": problems,
        "inferred": inferred,
        "warnings": attempts,
    }
    lines = [
        f"{'would write' if args.dry_run else 'wrote'} {location.child(index_name)}: {len(entries)} shards, "
        f"{document['samples']} samples"
    ]
    if inferred:
        lines += ["inferred (not read from the shards):", *(f"  {text}" for text in inferred)]
    lines += [f"warning: {text}" for text in attempts]
    if problems:
        lines += [f"{len(problems)} shard(s) left out:", table([[p] for p in problems], ["problem"])]
    emit(args, document, "\n".join(lines))
    return PROBLEMS if problems or not entries else OK


def _from_log(args: argparse.Namespace, location: DatasetRoot, listing: set[str], previous: bytes | None) -> int:
    """Publish the index of the commit log's newest state, if every file it names is there."""
    state = commit_log.read_snapshot(location)
    missing = [info["basename"] for shard in state.shards for info in stored_files(shard)]
    missing = [name for name in missing if name not in listing]
    written = not args.dry_run and not missing
    if written:
        if previous is not None:
            location.write_bytes(INDEX_BASENAME + ".bak", previous)
        commit_log.publish_checkpoint(location, state)
    samples = sum(int(shard["samples"]) for shard in state.shards)
    document = {
        "root": location.url,
        "written": written,
        "source": f"commit log version {state.version}",
        "shards": len(state.shards),
        "samples": samples,
        "missing": missing,
    }
    verb = "would write" if args.dry_run or missing else "wrote"
    lines = [
        f"{verb} {location.child(INDEX_BASENAME)} from the commit log (version {state.version}): "
        f"{len(state.shards)} shards, {samples} samples"
    ]
    if missing:
        lines += [
            f"{len(missing)} file(s) the log's newest state names are missing, so nothing was written:",
            *(f"  {name}" for name in missing[:20]),
        ]
    emit(args, document, "\n".join(lines))
    return PROBLEMS if missing else OK


def _duplicate_attempts(basenames: list[str]) -> list[str]:
    """Spark attempt folders of one partition that all hold shards (a lost speculative copy, say)."""
    partitions: dict[str, set[str]] = {}
    for name in basenames:
        match = re.search(r"(^|/)(part-\d+)-attempt-[^/]+/", name)
        if match:
            folder = name[: match.end() - 1]
            partitions.setdefault(name[: match.start(2)] + match.group(2), set()).add(folder)
    return [
        f"{len(folders)} attempt folders hold shards of {partition}: {sorted(folders)}; keep one (delete the others "
        f"and rebuild again), or the samples appear more than once"
        for partition, folders in sorted(partitions.items())
        if len(folders) > 1
    ]
