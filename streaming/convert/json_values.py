"""The JSON rule: turn Arrow values of any type into JSON text without losing information.

Arrow does the bulk work first: dates, timestamps, times and durations become their integers, decimals
their exact text. What is left for Python is what JSON cannot hold directly: binary (base64 text),
maps (objects when keyed by strings, otherwise ``[key, value]`` pairs) and calendar intervals
(``{"months", "days", "microseconds"}``). NULL becomes ``null`` at any depth.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

Converter = Callable[[Any], Any]


def _arrow_ready_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every leaf that JSON cannot hold as is replaced by a type it can."""
    types = pa.types
    if types.is_date32(data_type) or types.is_time32(data_type):
        return pa.int32()
    if (
        types.is_date64(data_type)
        or types.is_timestamp(data_type)
        or types.is_duration(data_type)
        or types.is_time64(data_type)
    ):
        return pa.int64()
    if types.is_map(data_type):
        return pa.map_(_arrow_ready_type(data_type.key_type), _arrow_ready_type(data_type.item_type))
    if types.is_large_list(data_type):
        return pa.large_list(_arrow_ready_type(data_type.value_type))
    if types.is_fixed_size_list(data_type):
        return pa.list_(_arrow_ready_type(data_type.value_type), data_type.list_size)
    if types.is_list(data_type):
        return pa.list_(_arrow_ready_type(data_type.value_type))
    if types.is_struct(data_type):
        return pa.struct([pa.field(field.name, _arrow_ready_type(field.type)) for field in data_type])
    return data_type


def _base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _interval(value: Any) -> dict[str, int]:
    return {"months": value.months, "days": value.days, "microseconds": value.nanoseconds // 1000}


def _python_converter(data_type: pa.DataType) -> Converter | None:
    """A function fixing up one ``to_pylist`` value of ``data_type`` for ``json.dumps``; None if none is needed."""
    types = pa.types
    if types.is_binary(data_type) or types.is_large_binary(data_type) or types.is_fixed_size_binary(data_type):
        return _base64
    if data_type == pa.month_day_nano_interval():
        return _interval
    if types.is_decimal(data_type):
        # Python's text of the Decimal pyarrow builds with the column's scale (`1.50`, `0E-10`), as the `str_decimal`
        # encoding writes it; not Arrow's cast, which pyarrow 8 lacks and pyarrow 14 writes `2.E-10` with.
        return str
    if types.is_map(data_type):
        key = _python_converter(data_type.key_type) or (lambda k: k)
        item = _python_converter(data_type.item_type) or (lambda v: v)
        key_type = data_type.key_type
        if types.is_string(key_type) or types.is_large_string(key_type) or types.is_decimal(key_type):
            return lambda pairs: {key(k): item(v) if v is not None else None for k, v in pairs}
        return lambda pairs: [[key(k), item(v) if v is not None else None] for k, v in pairs]
    if types.is_list(data_type) or types.is_large_list(data_type) or types.is_fixed_size_list(data_type):
        element = _python_converter(data_type.value_type)
        if element is None:
            return None
        return lambda items: [element(x) if x is not None else None for x in items]
    if types.is_struct(data_type):
        fields = [(field.name, _python_converter(field.type)) for field in data_type]
        if all(convert is None for _, convert in fields):
            return None
        return lambda row: {
            name: convert(row[name]) if convert and row[name] is not None else row[name] for name, convert in fields
        }
    return None


def json_payloads(array: pa.Array) -> list[bytes]:
    """The UTF-8 JSON text of every value of ``array`` (NULL → ``null``), as upstream's ``json`` encoding writes it."""
    ready_type = _arrow_ready_type(array.type)
    if ready_type != array.type:
        array = array.cast(ready_type)
    convert = _python_converter(ready_type)
    values = array.to_pylist()
    dumps = json.dumps
    if convert is None:
        return [dumps(value).encode("utf-8") for value in values]
    return [dumps(convert(value) if value is not None else None).encode("utf-8") for value in values]
