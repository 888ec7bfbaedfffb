"""A data file's column in the table's current type: Delta's type widening, and the storage spellings of one type.

With the ``typeWidening`` table feature (``typeWidening-preview`` in Delta 3.x), ``ALTER TABLE ... ALTER COLUMN
... TYPE`` (or schema evolution) changes a column's type without rewriting the files written before: each older
file keeps the narrower type, and a reader casts it up to the table's type (Delta's PROTOCOL.md, "Type
Widening"). The widenings Delta defines, each exact:

* ``byte`` -> ``short``, ``int``, ``long``, ``decimal``, ``double``; ``short`` -> ``int``, ``long``, ``decimal``,
  ``double``; ``int`` -> ``long``, ``decimal``, ``double``; ``long`` -> ``decimal`` (a decimal with room for
  every value: at least ``decimal(10, 0)``, ``decimal(20, 0)`` for ``long``);
* ``float`` -> ``double``;
* ``decimal(p, s)`` -> ``decimal(p + k1, s + k2)`` with ``k1 >= k2 >= 0``;
* ``date`` -> ``timestamp_ntz`` (midnight of the day);

at the top level and inside structs, arrays and maps. Each is Arrow's safe cast, so a value that would not fit
(a table whose log does not match its files) is an error naming the file and column, never a changed value.
The same walk gives timestamps of every Parquet unit as microseconds (`streaming.delta.timestamps`), and a
struct written before a field was added to it that field as NULL.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from streaming.delta.errors import UnreadableValueError
from streaming.delta.timestamps import as_micros


def widened(column: pa.Array, target: pa.DataType, where: str) -> pa.Array:
    """``column`` (as a data file stores it) as ``target``, the table's type laid out under the file's physical
    names; ``where`` names the file and column in an error."""
    if column.type == target:
        return column
    if isinstance(column, pa.ExtensionArray):
        return widened(column.storage, target, where)
    if pa.types.is_struct(target) and pa.types.is_struct(column.type):
        return _struct(column, target, where)
    if _is_list(target) and _is_list(column.type):
        offsets, (values,) = _own_offsets(column, column.values)
        values = widened(values, target.value_type, f"{where}[]")
        return type(column).from_arrays(offsets, values, type=target, mask=column.is_null())
    if pa.types.is_map(target) and pa.types.is_map(column.type):
        offsets, (keys, items) = _own_offsets(column, column.keys, column.items)
        keys = widened(keys, target.key_type, f"{where}{{key}}")
        items = widened(items, target.item_type, f"{where}{{value}}")
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=column.is_null())
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(column.type):
        return as_micros(column, target)
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise UnreadableValueError(
            f"{where} is stored as {column.type}, which cannot be read as the table's type {target} ({err})"
        ) from None


def _struct(column: pa.StructArray, target: pa.StructType, where: str) -> pa.Array:
    """A struct's fields by name, each widened; a field the file lacks is NULL."""
    held = {column.type.field(index).name: index for index in range(column.type.num_fields)}
    children = []
    for field in target:
        if field.name in held:
            child = column.field(held[field.name])  # the child as its parent's slice sees it
            children.append(widened(child, field.type, f"{where}.{field.name}"))
        else:
            children.append(pa.nulls(len(column), field.type))
    return pa.StructArray.from_arrays(children, fields=list(target), mask=column.is_null())


def _own_offsets(column: pa.Array, *children: pa.Array) -> tuple[pa.Array, list[pa.Array]]:
    """A list or map slice's offsets from 0 and its children's values it spans (Arrow rebuilds a list with
    nulls only from offsets of its own)."""
    offsets = column.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, start), [child.slice(start, end - start) for child in children]


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)
