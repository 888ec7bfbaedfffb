"""`verify URL`: check a dataset end to end and list every problem (exit code 1 when there is one).

Checks: `index.json` is present and valid; every file it names is stored with the recorded size and hashes;
each shard's header agrees with its index entry (sample count, columns, encodings, compression); every sample
decodes; and no file sits in the dataset that no index references (left by a crashed or failed run: remove
such files with `mds-streaming vacuum`). `--sample N` checks N shards chosen at random instead of all.
"""

from __future__ import annotations

import argparse
import os
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streaming.cli.console import (
    OK,
    PROBLEMS,
    counted,
    dataset_folder,
    emit,
    progress,
    table,
    unsafe_columns,
    unsafe_refusal,
)
from streaming.format.commit_log import LOG_FOLDER
from streaming.format.index import (
    COMPRESSED_KEYS,
    INDEX_BASENAME,
    METADATA_BASENAME,
    RAW_DATA,
    RAW_META,
    MissingIndexError,
    read_index,
    shard_files,
)
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.scratch import make_scratch, remove_scratch

EXAMPLES = """\
examples:
  mds-streaming verify /data/ds
  mds-streaming verify s3://bucket/ds --sample 20          # 20 random shards, for a quick look at a big dataset
  mds-streaming verify s3://bucket/ds --json | jq '.problems[]'
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "verify",
        parents=[common],
        help="check files, sizes, hashes, headers and every sample; list each problem",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", help="dataset root (the folder holding index.json), any URL")
    parser.add_argument("--sample", type=int, metavar="N", help="check N random shards only")
    parser.add_argument("--seed", type=int, default=0, help="which shards --sample picks (default 0)")
    parser.add_argument("--jobs", type=int, default=8, help="shards checked in parallel (default 8)")
    parser.add_argument(
        "--allow-unsafe-types", action="store_true", help="also decode pickled (pkl) columns, which can run code"
    )
    parser.set_defaults(run=run)


def _problem(file: str, problem: str, hint: str) -> dict[str, str]:
    return {"file": file, "problem": problem, "hint": hint}


def check_shard(
    location: DatasetRoot, number: int, shard: dict[str, Any], listing: set[str], unsafe: bool
) -> tuple[list[dict[str, str]], int]:
    """The problems of one shard, and how many of its samples decoded."""
    from streaming.cli.shards import header_mismatches, parse_header
    from streaming.format.compression import decompress
    from streaming.format.hashing import get_hash
    from streaming.format.reader_registry import reader_from_json

    problems = []
    rebuild = f"if the shard files are right, rebuild the index: mds-streaming rebuild-index {location.url}"
    scratch = make_scratch("mds-verify-")
    try:
        contents: dict[str, bytes] = {}
        for key, info in shard_files(shard):
            name = info["basename"]
            if name not in listing:
                if key in COMPRESSED_KEYS and shard.get(COMPRESSED_KEYS[key]):
                    continue  # a compressed shard stores only its compressed copy
                problems.append(
                    _problem(name, f"missing (shard {number}, {key})", "restore it from a copy, or " + rebuild)
                )
                continue
            size = location.size(name)
            if size is None:  # listed, yet not a regular file: a link, a FIFO or a device
                problems.append(
                    _problem(name, "is not a regular file (a link, FIFO or device)", "replace it with the shard file")
                )
                continue
            if size != info["bytes"]:
                problems.append(
                    _problem(name, f"is {size} bytes, the index says {info['bytes']}", "re-copy it from the source")
                )
                continue
            # A private copy, even of a local dataset (decompressing must not add files to the dataset): a
            # regular file reached without following a link, no longer than the index says.
            path = location.fetch(name, scratch, info["bytes"])
            with open(path, "rb") as stream:
                data = stream.read()
            for algo, expected in sorted((info.get("hashes") or {}).items()):
                actual = get_hash(algo, data)
                if actual != expected:
                    problems.append(
                        _problem(name, f"{algo} is {actual}, the index says {expected}", "re-copy it from the source")
                    )
            contents[key] = data
        if problems:
            return problems, 0
        # MDS keeps its header in the data file; the split formats keep theirs in the meta file.
        header_key = RAW_DATA if shard.get("format") == "mds" else RAW_META
        zip_key = COMPRESSED_KEYS[header_key]
        header_bytes = contents.get(header_key)
        if header_bytes is None and zip_key in contents:
            try:
                header_bytes = decompress(shard.get("compression"), contents[zip_key], shard[header_key]["bytes"])
            except Exception as err:  # noqa: BLE001 - reported as a problem of this file
                name = shard[zip_key]["basename"]
                return [_problem(name, f"does not decompress with {shard.get('compression')}: {err}", rebuild)], 0
        name = shard[header_key]["basename"]
        try:
            header = parse_header(header_bytes or b"", name, meta=header_key == RAW_META)
            mismatches = header_mismatches(header, shard)
        except ValueError as err:
            return [_problem(name, str(err), "re-copy it from the source, or " + rebuild)], 0
        problems += [_problem(name, f"header disagrees with the index: {text}", rebuild) for text in mismatches]
        if mismatches:
            return problems, 0
        refused = unsafe_columns(shard)
        if refused and not unsafe:
            return [_problem(name, "samples not decoded", unsafe_refusal(refused))], 0
        reader = reader_from_json(scratch, None, shard)
        reader.validate(unsafe)
        decoded = 0
        for index in range(int(shard["samples"])):
            try:
                reader.get_item(index)
            except Exception as err:  # noqa: BLE001 - reported as a problem of this sample
                problems.append(_problem(name, f"sample {index} does not decode: {err}", "re-copy the shard"))
                break
            decoded += 1
        return problems, decoded
    finally:
        remove_scratch(scratch)


def unreferenced_files(listing: set[str], shards: list[dict[str, Any]]) -> list[str]:
    """Files in the dataset folder that neither the index nor a sub-dataset index account for."""
    named = {info["basename"] for shard in shards for _, info in shard_files(shard)}
    extra = []
    for name in sorted(listing - named - {INDEX_BASENAME, METADATA_BASENAME}):
        if os.path.basename(name) == INDEX_BASENAME:
            continue  # a sub-dataset's index (a merged dataset's part, a Spark attempt's own index)
        if name.startswith(f"{LOG_FOLDER}/"):
            continue  # the commit log (streaming.format.commit_log): the history `index.json` checkpoints
        extra.append(name)
    return extra


def run(args: argparse.Namespace) -> int:
    location = DatasetRoot(dataset_folder(args.url, "verify"))
    listing = set(location.list_relative())
    try:
        shards = read_index(location)
    except MissingIndexError as err:
        problem = _problem(INDEX_BASENAME, "missing", str(err).split("If the index", 1)[-1].strip() or str(err))
        return _report(args, location, [problem], 0, 0, 0, 0)
    except ValueError as err:
        problem = _problem(INDEX_BASENAME, f"unreadable: {err}", f"mds-streaming rebuild-index {location.url} --force")
        return _report(args, location, [problem], 0, 0, 0, 0)
    chosen = list(range(len(shards)))
    if args.sample is not None and args.sample < len(shards):
        chosen = sorted(random.Random(args.seed).sample(chosen, max(args.sample, 0)))
    problems: list[dict[str, str]] = []
    decoded = 0
    with ThreadPoolExecutor(max(1, args.jobs), thread_name_prefix="mds-verify") as pool:
        results = pool.map(lambda n: check_shard(location, n, shards[n], listing, args.allow_unsafe_types), chosen)
        for found, count in progress(args, results, total=len(chosen), unit="shards", desc="verify"):
            problems += found
            decoded += count
    if args.sample is None or args.sample >= len(shards):
        problems += [
            _problem(name, "not referenced by the index", f"left by a failed run? mds-streaming vacuum {location.url}")
            for name in unreferenced_files(listing, shards)
        ]
    return _report(args, location, problems, len(shards), len(chosen), sum(s["samples"] for s in shards), decoded)


def _report(
    args: argparse.Namespace,
    location: DatasetRoot,
    problems: list[dict[str, str]],
    shards: int,
    checked: int,
    samples: int,
    decoded: int,
) -> int:
    document = {
        "root": location.url,
        "ok": not problems,
        "shards": shards,
        "shards_checked": checked,
        "samples": samples,
        "samples_decoded": decoded,
        "problems": problems,
    }
    head = f"{location.url}: checked {checked} of {counted(shards, 'shard')}, decoded {counted(decoded, 'sample')}"
    if problems:
        rows = [[p["file"], p["problem"], p["hint"]] for p in problems]
        text = f"{head}\n{len(problems)} problem(s):\n{table(rows, ['file', 'problem', 'what to do'])}"
    else:
        text = f"{head}: no problems found"
    emit(args, document, text)
    return PROBLEMS if problems else OK
