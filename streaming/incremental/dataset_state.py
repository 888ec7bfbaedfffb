"""What a dataset holds of the table it follows: the table version it reached and the columns it stores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streaming.convert.null_plan import dataset_columns
from streaming.convert.row_identity import value_columns
from streaming.format import commit_log
from streaming.format.index import stored_file
from streaming.format.runs import increment_version
from streaming.incremental.reader import TableReader
from streaming.storage.dataset_root import DatasetRoot


def held_version(destination: DatasetRoot, table: str, state: commit_log.Snapshot) -> int | None:
    """The version of ``table`` the committed state holds, or None for an empty dataset.

    Raises ValueError when the dataset has shards but no record of coming from ``table``.
    """
    if table in state.source_versions:
        return state.source_versions[table]
    if state.source_versions:
        raise ValueError(
            f"{destination.url} holds versions of {sorted(state.source_versions)}, not of {table!r}: one dataset "
            f"follows one table. Choices: the table it follows, or another `out`."
        )
    shards = state.shards
    # Datasets written before the state recorded source versions: the newest increment folder a shard lies in.
    found = (increment_version(stored_file(shard)["basename"]) for shard in shards)
    versions = [version for version in found if version is not None]
    if versions:
        return max(versions)
    if not shards:
        return None
    converted = _converted_version(table, state)
    if converted is None:
        count = f"{len(shards)} shard" + ("s" if len(shards) != 1 else "")
        raise ValueError(
            f"{destination.url} holds {count} but no record of which version of "
            f"{table!r} they came from (it was written neither by incremental_to_mds nor by "
            f"dataframe_to_mds from this table). Choices: another `out`, or rebuild it with "
            f"dataframe_to_mds({table!r}, out, mode='overwrite') and run again."
        )
    return converted


def _converted_version(table: str, state: commit_log.Snapshot) -> int | None:
    """The table version recorded by the ``dataframe_to_mds`` run the state holds, if it converted ``table``.

    With a commit log the metadata comes from the same commit as the shards. A dataset without one has it
    in ``mds_conversion.json``, which an older version wrote before the index, so a crash between the two
    left it newer than the index: there the newest recorded run whose shards the index holds counts.
    """
    metadata = state.metadata or {}
    runs = [metadata.get("latest") or {}] if state.logged else list(reversed(metadata.get("runs") or []))
    for run in runs:
        source = run.get("source") or {}
        if source.get("name") != table or source.get("version") is None:
            continue
        prefix = f"{run.get('run')}/"
        if state.logged or any(stored_file(shard)["basename"].startswith(prefix) for shard in state.shards):
            return int(source["version"])
    return None


def held_columns(
    source: TableReader,
    existing: list[dict[str, Any]],
    columns: Mapping[str, str] | Sequence[str] | None,
    table: str,
) -> tuple[list[str], list[str], dict[str, str]]:
    """The value columns the dataset holds (or its first run will), the table's columns it does not hold, and
    the encodings rows are identified by (the dataset's own once it has shards)."""
    present = source.column_names()
    dataset = dataset_columns(existing)
    if dataset is None or columns is not None:
        chosen = list(source.encodings(columns))  # bad `columns` fail here, before any read
    else:
        chosen = list(value_columns(dataset))
    gone = [name for name in chosen if name not in present]
    if gone:
        raise ValueError(
            f"Version {source.version} of {table!r} no longer has the dataset's column(s) {gone}, so its rows "
            f"cannot be stored in the dataset's shards. Choices: add the column(s) back, or convert the table "
            f"again into a new dataset (dataframe_to_mds({table!r}, out, mode='overwrite'))."
        )
    encodings = value_columns(dataset) if dataset is not None else source.encodings(chosen)
    if dataset is not None:
        widened = widened_columns(encodings, source.encodings(chosen))
        if widened:
            raise ValueError(
                f"Version {source.version} of {table!r} widened the type of {', '.join(widened)} (Delta type "
                f"widening, delta.enableTypeWidening): its values may no longer fit the dataset's shards. Choices: "
                f"convert the table again into a new dataset (dataframe_to_mds({table!r}, out, mode='overwrite'))."
            )
    return chosen, [name for name in present if name not in chosen], encodings


def widened_columns(held: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """``column (old -> new)`` for each column whose numeric encoding in ``now`` is a wider one of the same kind
    than in ``held``, or a float where it held an integer (int32 -> int64, float32 -> float64, int32 -> float64,
    a date's int32 -> a timestamp's int64: what Delta's type widening does to a column)."""
    found = []
    for name, old in held.items():
        new = now.get(name, old)
        old_kind, new_kind = old.rstrip("0123456789"), new.rstrip("0123456789")
        if old_kind in ("int", "uint", "float") and old_kind == new_kind and new != old:
            if int(new[len(new_kind) :]) > int(old[len(old_kind) :]):
                found.append(f"{name} ({old} -> {new})")
        elif old_kind in ("int", "uint") and new_kind == "float":
            found.append(f"{name} ({old} -> {new})")
    return found
