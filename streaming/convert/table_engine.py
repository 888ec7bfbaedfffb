"""`convert_table`: write an Arrow table that is already in this process as MDS, through the conversion driver.

An engine of `streaming.convert.driver` for rows that are in memory already (what ``incremental_to_mds`` has
when delta-rs read the table's change): one task attempt, run here, through the same type rules, NULL plan,
encoder and commit as ``dataframe_to_mds`` and the command line's ``convert``, so the dataset's bytes do not
depend on which engine wrote them. Imports pyarrow only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from streaming.convert.arrow_columns import ArrowColumns
from streaming.convert.attempt import Attempt, TaskConfig, write_attempt
from streaming.convert.driver import ConversionResult, Settings, run_conversion
from streaming.convert.null_plan import check_policy
from streaming.convert.source import Source
from streaming.convert.type_rules import normalize_batch, resolve_columns
from streaming.format.compression import check_compression
from streaming.format.hashing import check_hashes
from streaming.format.writer import parse_size_limit
from streaming.storage.dataset_root import DatasetRoot

#: Rows per record batch handed to the encoder (bounds the encoder's working memory).
BATCH_ROWS = 65_536


class TableEngine(ArrowColumns):
    """Runs one task attempt over an in-memory Arrow table, in this process."""

    task_label = "table"

    def __init__(self, rows: pa.Table, source: Source) -> None:
        self.rows = rows
        self.schema = rows.schema
        self.source = source

    def count_nulls(
        self, values: list[str], elements: list[str], nested: list[str]
    ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        return self.count_batches(self.rows.to_batches(), values, elements, nested)

    def run_attempts(self, config: TaskConfig, destination: DatasetRoot) -> list[Attempt]:
        values = dict.fromkeys(config.input_columns(), "")
        batches = (normalize_batch(batch, values) for batch in self.rows.to_batches(max_chunksize=BATCH_ROWS))
        return [write_attempt(config, batches, 0, 0)]


def convert_table(
    rows: pa.Table,
    out: str,
    *,
    source: Source,
    columns: Mapping[str, str] | Sequence[str] | None = None,
    compression: str | None = "zstd",
    hashes: Sequence[str] = (),
    size_limit: int | str | None = "64mb",
    mode: str = "error",
    nulls: str = "mask",
    join_shards: Sequence[dict] = (),
    caller: str = "convert_table",
) -> ConversionResult:
    """Convert ``rows`` into the MDS dataset ``out``; the arguments are ``dataframe_to_mds``'s."""
    check_policy(nulls)
    settings = Settings(
        compression=check_compression(compression),
        hashes=tuple(check_hashes(list(hashes))),
        size_limit=parse_size_limit(size_limit),
        mode=mode,
        nulls=nulls,
        caller=caller,
    )
    plan = resolve_columns(list(zip(rows.schema.names, rows.schema.types)), columns)
    explicit = set(columns) if isinstance(columns, Mapping) else set()
    engine = TableEngine(rows.select(list(plan)), source)
    return run_conversion(engine, DatasetRoot(out), plan, settings, explicit=explicit, join_shards=join_shards)
