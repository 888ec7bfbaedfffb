"""What the conversion driver asks of an Arrow schema, for both Arrow engines (files and in-memory tables).

The driver's `Engine` protocol asks which columns are nullable, which hold arrays of arrays, which are JSON text,
and for one pass of NULL and shape counts; `ArrowColumns` answers from a ``pa.Schema`` and record batches so that
`arrow_engine` and `table_engine` share one answer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import pyarrow as pa

from streaming.convert.arrow_arrays import nested_row_flags
from streaming.convert.type_rules import array_element, json_text_columns, spark_equivalent


class ArrowColumns:
    """The schema questions of the driver's `Engine` protocol, answered from ``self.schema``."""

    schema: pa.Schema

    def nullable_columns(self, columns: Collection[str]) -> tuple[list[str], list[str]]:
        fields = {item.name: item for item in self.schema}
        nullable = [name for name in columns if fields[name].nullable]
        elements = [name for name in columns if elements_nullable(fields[name].type)]
        return nullable, elements

    def nested_columns(self, columns: Collection[str]) -> list[str]:
        return [name for name in columns if self._depth(name, 0) >= 2]

    def json_text_columns(self, columns: Collection[str]) -> list[str]:
        return json_text_columns([(name, self.schema.field(name).type) for name in columns])

    def count_batches(
        self, batches: Iterable[pa.RecordBatch], values: list[str], elements: list[str], nested: list[str]
    ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """NULLs of ``values``, rows with NULL elements of ``elements`` and rows that are not rectangular of
        ``nested``, in one pass over ``batches``."""
        counts = dict.fromkeys(values, 0)
        rows_with_null_elements = dict.fromkeys(elements, 0)
        ragged_rows = dict.fromkeys(nested, 0)
        depths = {name: self._depth(name, 1) for name in elements + nested}
        for batch in batches:
            for name in values:
                counts[name] += batch.column(name).null_count
            for name in dict.fromkeys(elements + nested):
                nulls, ragged = nested_row_flags(batch.column(name), depths[name])
                if name in rows_with_null_elements:
                    rows_with_null_elements[name] += int(nulls.sum())
                if name in ragged_rows:
                    ragged_rows[name] += int(ragged.sum())
        return counts, rows_with_null_elements, ragged_rows

    def _depth(self, name: str, default: int) -> int:
        return (array_element(self.schema.field(name).type) or ("", default))[1]


def elements_nullable(data_type: pa.DataType) -> bool:
    """Whether a list type (nested at any depth) allows NULL elements or NULL inner lists."""
    data_type = spark_equivalent(data_type)
    while pa.types.is_list(data_type):
        if data_type.value_field.nullable:
            return True
        data_type = data_type.value_type
    return False
