"""``incremental_to_mds(table, out, mode="mirror", key=[...])``: the dataset holds exactly the table's rows.

**What the dataset holds.** After each run, exactly the rows of the table version it reached, as a multiset, on
the dataset's columns: inserted rows are appended, deleted rows are removed, an updated row's old value is
removed and its new value appended. The change is read as the append-only job reads it
(`streaming.incremental.change`: nothing for maintenance, the Change Data Feed, the changed files, both versions
whole), as the rows the window adds and the rows it takes away, net of each other by row identity. The rows
taken away are found in the dataset by their key (``key``: columns unique in every table version; a version
where they are not is refused, naming duplicate values).

**Cost follows the change.** The key map (`streaming.convert.key_map`) says which shard and sample hold each
key; only the shards holding a removed row are read, and each is written again without those rows under a new
name (`streaming.convert.shard_rewrite`: copy on write of the stored bytes). Untouched shards are never read.
New rows go into new shards, converted as the append-only job converts them.

**One commit.** The rewritten shards' copies, the new shards, the new key-map file and the table version are
published by one ``replace`` commit of the commit log (`streaming.format.commit_log`), which names the
replaced shards' files in ``remove``: readers of the older ``index.json`` keep finding them until ``vacuum``'s
retention. Index order: the kept shards in their order, then the rewritten copies, then the new shards (a
change moves samples, and so the order a seed gives, whatever the placement). A run that dies before the
commit changes nothing: its files are left for ``vacuum`` and the next run redoes the work from the version
the dataset holds.

**Audit.** The commit file records, beside the table version, the digests of the keys the run removed and of
those it replaced (`streaming.convert.key_map`: never a removed value, nor a key in clear); ``inspect`` shows
them. Commit files go with ``vacuum`` after its retention: keep ``inspect --json``'s output where a longer record
is needed.

**When history is gone** (the change can no longer be read: `IncrementalHistoryError`), ``resync=True`` compares
the target version's rows with the rows the dataset stores (it reads every shard and the whole version once),
removes the dataset's rows the version lacks and appends the version's rows the dataset lacks, through the same
rewrite and commit.

Both readers serve: delta-rs (a Delta path; rows written on the driver) and Spark's Delta reader (a table name;
the keys' digests are computed on the executors and only the key columns come to the driver, the new rows are
written by a Spark job). ``resync`` reads with delta-rs only.

**Without ``key``**, a table with Delta row tracking is keyed by its stable row ids, which ``UPDATE``, ``MERGE``,
``OPTIMIZE`` and ``RESTORE`` keep: delta-rs reads them from the log (`streaming.delta.row_ids`), Spark's reader as
``_metadata.row_id`` (a table by name). Each sample stores its row's id in the column `ROW_ID` (``_row_id``), and
the change is read from the changed files (the Change Data Feed carries no row ids). Any other table needs ``key``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.convert import key_map
from streaming.convert.null_plan import WIDENING_POLICY
from streaming.convert.row_identity import stored_identities
from streaming.convert.shard_rewrite import rewrite_without
from streaming.delta.errors import HistoryUnavailableError
from streaming.delta.row_ids import ROW_ID
from streaming.format import commit_log
from streaming.format.index import FILE_KEYS, read_index, rebase
from streaming.format.runs import new_increment_folder, new_run_id
from streaming.incremental.change import Change, IncrementalHistoryError, history_error, read_change
from streaming.incremental.commit import commit_run
from streaming.incremental.dataset_state import held_columns, held_version
from streaming.incremental.options import RunOptions
from streaming.incremental.reader import KeyValues, ReaderChoice, TableReader
from streaming.incremental.result import RECORD_BASENAME, IncrementResult, run_record
from streaming.storage.dataset_root import DatasetRoot

logger = logging.getLogger(__name__)
#: How many duplicate key values an error names.
SHOWN_DUPLICATES = 5


@dataclass(frozen=True)
class _Rewrites:
    """The shards a run rewrote: their replacements' entries and map entries, the files it removed."""

    added: list[dict[str, Any]]
    entries: list[pa.Table]
    removed_files: list[str]
    removed_ids: set[str]
    bytes_read: int
    bytes_written: int


def mirror_to_mds(choice: ReaderChoice, table: str, destination: DatasetRoot, options: RunOptions) -> IncrementResult:
    """One mirror run (``options`` are ``incremental_to_mds``'s, checked; see the module docstring)."""
    resync, change_data_feed = options.resync, options.change_data_feed
    if resync and not choice.resyncs_mirror:
        raise ValueError(
            f"resync=True with mode='mirror' reads {table!r} with delta-rs only: give the table's storage path "
            f"(with no Delta-enabled SparkSession), or rebuild the mirror into a new `out`."
        )
    choice.check_destination(destination.url, options.executor_env)  # Spark's tasks will write the shards
    source = _keyed_reader(choice.open(table, options.version), options.key)
    names_key = _key_columns(options.key, source, table)
    if source.row_ids:
        if change_data_feed:
            raise ValueError(
                f"change_data_feed=True but this mirror of {table!r} is keyed by Delta row ids, which the Change "
                f"Data Feed does not carry. Choices: change_data_feed=None (the changed files are read), or "
                f"key=[...]."
            )
        change_data_feed = False
    committed = commit_log.read_snapshot(destination)
    held = held_version(destination, table, committed)
    record = key_map.mirror_record(committed)
    target = source.version
    _refuse_another_dataset(destination, table, held, record, names_key, target)
    if held == target and not resync:
        return IncrementResult(destination.url, table, held, target, "up_to_date", 0, 0, 0, mode=key_map.MIRROR)
    if resync and held is None:
        raise ValueError(f"resync=True needs an existing dataset at {destination.url}; the first run converts it.")
    columns = options.columns
    names, ignored, encodings = held_columns(source, committed.shards, columns, table)
    absent = [name for name in names_key if name not in names]
    if absent:
        raise ValueError(
            f"The key column(s) {absent} are not among the dataset's columns {sorted(names)}: a mirror finds "
            f"rows by what it stores. Choices: include them in `columns`, or another key."
        )
    key_encodings = {name: encodings[name] for name in names_key}
    change, taken_keys = _read_change(
        destination, source, table, held, committed.shards, names, encodings, key_encodings, change_data_feed, resync
    )
    added = change.added
    added_keys, key_values = source.key_digests(added, key_encodings) if added is not None else ([], _no_values)
    files = list((record or {}).get("files") or [])
    loaded = key_map.load(destination, files, committed.shards) if held is not None else None
    live = loaded.entries if loaded is not None else key_map.SCHEMA.empty_table()
    located = _locate(live, taken_keys, table, destination)
    kept = live.filter(pc.invert(pc.is_in(live["key"], value_set=pa.array(taken_keys, pa.binary()))))
    _check_unique(added_keys, key_values, kept, names_key, table, target)

    run = new_run_id()
    folder = new_increment_folder(target)
    rewrites = _rewrite(destination, committed.shards, located, live, folder, key_encodings)
    new_shards: list[dict[str, Any]] = []
    samples = 0
    if added_keys:
        new_columns = columns if columns is not None or held is None else names
        samples, new_shards = _write_added(source, added, destination, folder, new_columns, committed.shards, options)
    new_entries = [
        key_map.entries(
            key_map.stored_keys(destination, shard, key_encodings), key_map.shard_id(shard), range(shard["samples"])
        )
        for shard in new_shards
    ]
    untouched = kept.filter(
        pc.invert(pc.is_in(kept["shard"], value_set=pa.array(sorted(rewrites.removed_ids), pa.string())))
    )
    largest = loaded.largest_file if loaded is not None else 0
    files = _write_map(destination, files, largest, untouched, [*rewrites.entries, *new_entries], target, run)
    replaced = sorted(set(taken_keys) & set(added_keys))
    result = IncrementResult(
        destination.url,
        table,
        held,
        target,
        change.method,
        samples,
        len(new_shards),
        0,
        ignored,
        mode=key_map.MIRROR,
        removed=len(taken_keys),
        shards_rewritten=len(located),
        bytes_read=rewrites.bytes_read,
        bytes_written=rewrites.bytes_written,
    )
    record = run_record(result, run, source.reader, key=names_key, files=files)
    if new_shards:
        destination.write_text(f"{folder}/{RECORD_BASENAME}", json.dumps(record, indent=2, sort_keys=True))
    # No re-read before the commit: a mirror always has a commit log, whose create-only commit finds any writer
    # that moved the dataset since `base`.
    commit_run(
        destination,
        table,
        held,
        target,
        lambda state: held_version(destination, table, state),
        committed,
        commit_log.REPLACE,
        [*rewrites.added, *new_shards],
        record,
        lost="this run's changes were not applied (its files are left for vacuum).",
        removed=rewrites.removed_files,
        audit=_audit(table, target, names_key, taken_keys, replaced, added_keys),
    )
    logger.info(
        "incremental_to_mds (mirror): %s %s -> %d: %d rows appended, %d removed, %d shards rewritten (%s)",
        table,
        held,
        target,
        samples,
        len(taken_keys),
        len(located),
        change.method,
    )
    return result


def _write_added(
    source: TableReader,
    added: Any,
    destination: DatasetRoot,
    folder: str,
    columns: Any,
    joined: list[dict[str, Any]],
    options: RunOptions,
) -> tuple[int, list[dict[str, Any]]]:
    """Write the rows to add as new shards in ``folder``, as append mode does; their count and index entries."""
    staged = source.write(
        added,
        destination.child(folder),
        columns=columns,
        mode="overwrite",
        nulls=WIDENING_POLICY if options.nulls == "mask" else options.nulls,
        join_shards=joined,
        executor_env=options.executor_env,
        **options.conversion(),
    )
    return staged.samples, [rebase(shard, folder) for shard in read_index(DatasetRoot(destination.child(folder)))]


def _refuse_another_dataset(
    destination: DatasetRoot,
    table: str,
    held: int | None,
    record: Mapping[str, Any] | None,
    names_key: list[str],
    target: int,
) -> None:
    """Refuse a dataset this run cannot mirror into: made in append mode, keyed otherwise, or newer than asked."""
    if held is not None and record is None:
        raise ValueError(
            f"{destination.url} was made in append mode (deleted rows stay in it), so it cannot be mirrored: it "
            f"has no key map. Choices: mode='append', or mode='mirror' into a new `out`."
        )
    if record is not None and list(record.get("key") or []) != names_key:
        raise ValueError(
            f"{destination.url} mirrors {table!r} by key {record.get('key')}, not {names_key}. Choices: "
            f"key={record.get('key')}, or another `out`."
        )
    if held is not None and target < held:
        raise ValueError(
            f"The dataset at {destination.url} already holds version {held} of {table!r}; version {target} is "
            f"older. Choices: version >= {held}, or another `out`."
        )


def _read_change(
    destination: DatasetRoot,
    source: TableReader,
    table: str,
    held: int | None,
    shards: list[dict[str, Any]],
    names: list[str],
    encodings: Mapping[str, str],
    key_encodings: Mapping[str, str],
    change_data_feed: bool | None,
    resync: bool,
) -> tuple[Change, list[bytes]]:
    """The change (the rows to add, and how they were read) and the key digests of the rows to take away."""
    if held is None:
        return Change(source.version_rows(), "snapshot"), []
    if resync:
        added, taken_keys = source.resync_mirror(
            _stored(destination, shards, encodings, key_encodings), names, encodings
        )
        return Change(added, "resync"), taken_keys
    try:
        change = read_change(source, table, held, names, encodings, change_data_feed, removed_rows=True)
        taken = change.removed_rows
        # Spark's rows are read here, not by read_change: files a VACUUM removed are found missing now.
        taken_keys = source.key_digests(taken, key_encodings)[0] if taken is not None else []
    except IncrementalHistoryError as caught:
        raise _mirror_history_error(caught, table, key_encodings) from caught
    except HistoryUnavailableError as caught:  # Spark's rows are read here (the keys), not by read_change
        version = caught.version if caught.version is not None else held + 1
        gone = history_error(table, held, source.version, caught, version)
        raise _mirror_history_error(gone, table, key_encodings) from caught
    return change, taken_keys


def _mirror_history_error(
    err: IncrementalHistoryError, table: str, key_encodings: Mapping[str, str]
) -> IncrementalHistoryError:
    """The run's history error with the mirror's way out."""
    return IncrementalHistoryError(
        f"{err} This dataset is a mirror: incremental_to_mds({table!r}, out, mode='mirror', "
        f"key={list(key_encodings)}, resync=True) also removes the rows the version no longer has.",
        err.version,
    )


def _audit(
    table: str, target: int, names_key: list[str], taken_keys: list[bytes], replaced: list[bytes], added: list[bytes]
) -> dict[str, Any]:
    """What the commit records of this run: the keys it removed and replaced, as digests, never values."""
    return {
        "table": table,
        "table_version": target,
        "key": names_key,
        "removed": sorted(digest.hex() for digest in set(taken_keys) - set(added)),
        "replaced": [digest.hex() for digest in replaced],
    }


def _stored(
    destination: DatasetRoot, shards: list[dict[str, Any]], encodings: Mapping[str, str], key: Mapping[str, str]
) -> Iterator[tuple[bytes, bytes]]:
    """Each sample the dataset stores, as its row identity and key digest, shard by shard: what a resync compares
    the table's version with (`RowArithmetic.resync_mirror`); every shard is read once."""
    for shard in shards:
        data = key_map.stored_data(destination, shard)
        yield from zip(stored_identities(data, shard, encodings), stored_identities(data, shard, key))


def _keyed_reader(source: TableReader, key: Sequence[str] | None) -> TableReader:
    """The reader to mirror with: without ``key`` (or with ``key=["_row_id"]``), the table read with its row ids
    when its reader can give them."""
    if not (key is None or list(key) == [ROW_ID]):
        return source
    return source.with_row_ids() or source


def _key_columns(key: Sequence[str] | None, source: TableReader, table: str) -> list[str]:
    """The key columns, checked: `ROW_ID` for a table read with its row ids; a missing key is otherwise refused,
    saying why the table's row ids cannot serve."""
    if source.row_ids:
        return [ROW_ID]
    if key is None:
        raise ValueError(
            f"mode='mirror' needs key=[...]: the columns that identify a row of {table!r} ({source.no_row_ids}). "
            f"Example: incremental_to_mds({table!r}, out, mode='mirror', key=['id'])."
        )
    if isinstance(key, str) or not key or not all(isinstance(name, str) and name for name in key):
        raise ValueError(f"key must be a non-empty list of column names, got {key!r}.")
    if len(set(key)) != len(key):
        raise ValueError(f"key names a column twice: {list(key)}.")
    present = source.column_names()
    missing = [name for name in key if name not in present]
    if missing:
        raise ValueError(f"{table!r} has no column(s) {missing} for the key; it has {present}.")
    return list(key)


def _locate(live: pa.Table, taken: list[bytes], table: str, destination: DatasetRoot) -> dict[str, list[int]]:
    """``{shard id: samples}`` holding the rows the change took away; every one must be in the dataset."""
    if not taken:
        return {}
    found = live.filter(pc.is_in(live["key"], value_set=pa.array(taken, pa.binary())))
    if found.num_rows != len(set(taken)) or len(set(taken)) != len(taken):
        raise commit_log.LogDamagedError(
            f"{len(taken)} rows left {table!r} but the key map of {destination.url} holds {found.num_rows} of "
            f"their keys: the dataset is not the mirror of the version it records (changed by another writer?). "
            f"Rebuild it: incremental_to_mds(table, new_out, mode='mirror', key=...)."
        )
    located: dict[str, list[int]] = {}
    for shard, sample in zip(found["shard"].to_pylist(), found["sample"].to_pylist()):
        located.setdefault(shard, []).append(sample)
    return located


def _no_values(chosen: list[int]) -> list[dict]:
    return []


def _check_unique(
    keys: list[bytes],
    values: KeyValues,
    kept: pa.Table,
    names: list[str],
    table: str,
    version: int,
) -> None:
    """Refuse a version where the key is not unique: a new row's key equals another new row's or a kept row's."""
    if not keys:
        return
    digests = pa.array(keys, pa.binary())
    counts = Counter(keys)
    twice = [index for index, digest in enumerate(keys) if counts[digest] > 1]
    clash = np.flatnonzero(np.asarray(pc.is_in(digests, value_set=kept["key"]), dtype=bool)).tolist()
    bad = sorted(set(twice) | set(clash))
    if bad:
        raise ValueError(
            f"The key {names} is not unique in version {version} of {table!r}: {len(bad)} row(s) share their key "
            f"with another row, e.g. {values(bad[:SHOWN_DUPLICATES])}. Nothing was written. Choices: a key that "
            f"is unique (more columns), or mode='append'."
        )


def _rewrite(
    destination: DatasetRoot,
    shards: list[dict[str, Any]],
    located: dict[str, list[int]],
    live: pa.Table,
    folder: str,
    key_encodings: Mapping[str, str],
) -> _Rewrites:
    """Rewrite each shard that holds taken-away rows without them (copy on write), in index order; each dropped
    sample's stored key is checked against the key map first, so a damaged map never drops another row."""
    added: list[dict[str, Any]] = []
    entries: list[pa.Table] = []
    removed_files: list[str] = []
    read = written = 0
    own = _entries_by_shard(live, located)
    touched = [shard for shard in shards if key_map.shard_id(shard) in located]
    for number, shard in enumerate(touched):
        name = key_map.shard_id(shard)
        removed_files += [info["basename"] for info in (shard.get(kind) for kind in FILE_KEYS) if info is not None]
        check = _dropping_only_mapped_keys(destination, shard, located[name], own[name], key_encodings)
        copy = rewrite_without(destination, shard, located[name], f"{folder}/rewritten/shard.{number:05d}.mds", check)
        read, written = read + copy.bytes_read, written + copy.bytes_written
        if copy.entry is None:
            continue  # no sample left: the shard is only removed
        keys, samples = own[name]
        keep = np.isin(samples, copy.kept)
        renumbered = np.searchsorted(np.asarray(copy.kept, dtype=np.int64), samples[keep])
        kept_keys = [key for key, wanted in zip(keys, keep.tolist()) if wanted]
        entries.append(key_map.entries(kept_keys, key_map.shard_id(copy.entry), renumbered))
        added.append(copy.entry)
    return _Rewrites(added, entries, removed_files, set(located), read, written)


def _dropping_only_mapped_keys(
    destination: DatasetRoot,
    shard: dict[str, Any],
    dropped: list[int],
    mapped: tuple[list[bytes], np.ndarray],
    key_encodings: Mapping[str, str],
) -> Callable[[bytes], None]:
    """A check of a shard's bytes: each sample to drop stores the key the map places there."""
    keys, samples = mapped
    claimed = dict(zip(samples.tolist(), keys))

    def check(raw: bytes) -> None:
        stored = stored_identities(raw, shard, key_encodings)
        wrong = [sample for sample in dropped if not 0 <= sample < len(stored) or stored[sample] != claimed[sample]]
        if wrong:
            raise commit_log.LogDamagedError(
                f"The key map of {destination.url} places removed rows at samples {wrong[:5]} of shard "
                f"{key_map.shard_id(shard)}, which store other keys; nothing was rewritten. Rebuild the mirror: "
                f"incremental_to_mds(table, new_out, mode='mirror', key=...)."
            )

    return check


def _entries_by_shard(live: pa.Table, located: dict[str, list[int]]) -> dict[str, tuple[list[bytes], np.ndarray]]:
    """The map entries (keys, samples) of each touched shard, in one pass over the map."""
    touched = live.filter(pc.is_in(live["shard"], value_set=pa.array(sorted(located), pa.string())))
    grouped: dict[str, tuple[list[bytes], list[int]]] = {}
    columns = (touched[name].to_pylist() for name in ("key", "shard", "sample"))
    for key, shard, sample in zip(*columns):
        keys, samples = grouped.setdefault(shard, ([], []))
        keys.append(key)
        samples.append(sample)
    return {shard: (keys, np.asarray(samples, np.int64)) for shard, (keys, samples) in grouped.items()}


def _write_map(
    destination: DatasetRoot,
    files: list[str],
    largest_file: int,
    untouched: pa.Table,
    new: list[pa.Table],
    version: int,
    run: str,
) -> list[str]:
    """Write this run's map file; returns the files that make up the map after it (compacted past MAX_FILES, or
    when a file would hold more rows than the dataset samples: `key_map.load` refuses such a file)."""
    name = key_map.file_name(version, run)
    fresh = pa.concat_tables([key_map.SCHEMA.empty_table(), *new])
    if len(files) + 1 > key_map.MAX_FILES or largest_file > untouched.num_rows + fresh.num_rows:
        key_map.write(destination, name, pa.concat_tables([untouched, fresh]))
        return [name]
    if fresh.num_rows == 0:
        return files
    key_map.write(destination, name, fresh)
    return [*files, name]
