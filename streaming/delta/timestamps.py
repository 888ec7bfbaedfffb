"""A data file's timestamps as Spark's Parquet reader gives them: microseconds, over the whole range Spark accepts.

Delta stores a ``timestamp`` or ``timestamp_ntz`` column as microseconds, but writers spell it in every Parquet
physical type: Spark itself writes INT96 by default (``spark.sql.parquet.outputTimestampType``), other writers
INT64 with a unit of milliseconds, microseconds or nanoseconds. Arrow reads INT96 as nanoseconds unless told
otherwise, and nanoseconds since 1970 in 64 bits end in 2262, so a warehouse's sentinel ``9999-12-31`` cannot
be read that way: `PARQUET_OPTIONS` has the file's INT96 read as microseconds, which reach from year 1 to 9999
and far beyond. A unit finer than a microsecond (INT64 nanoseconds) is floored to the microsecond below, as
Spark floors an INT96's nanoseconds of the day; a coarser one is exact.

Spark before 3.0 wrote dates and timestamps in the hybrid Julian calendar, and Spark 3 still can (the
``LEGACY`` rebase modes). Such a file says so in its metadata (`legacy_calendar`), and Spark's reader then
shifts values before the Gregorian switch, by rules that depend on its session's time zone. This reader does not
shift: a value of such a file before 1900 (where no time zone's rule differs from the proleptic calendar's any
more) is refused with the file and column named, rather than stored a few days off.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.delta.errors import UnreadableValueError

#: How every data file is opened (`pyarrow.parquet.ParquetFile`'s options): INT96 timestamps as microseconds.
PARQUET_OPTIONS = {"coerce_int96_timestamp_unit": "us"}
#: Keys of a Parquet file's metadata by which Spark marks values it wrote in the hybrid Julian calendar.
_SPARK_VERSION = b"org.apache.spark.version"
_LEGACY_KEYS = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")
#: 1900-01-01T00:00:00Z in microseconds and in days: the earliest value a legacy file is read at.
_LEGACY_FLOOR_MICROS = -2208988800 * 1_000_000
_LEGACY_FLOOR_DAYS = -25567


def legacy_calendar(metadata: dict[bytes, bytes] | None) -> bool:
    """Whether a file with this key-value ``metadata`` holds dates or timestamps in the hybrid Julian calendar
    (written by Spark before 3.0, or by a later Spark in a ``LEGACY`` rebase mode)."""
    if not metadata or _SPARK_VERSION not in metadata:
        return False
    if any(key in metadata for key in _LEGACY_KEYS):
        return True
    version = metadata[_SPARK_VERSION].decode("utf-8", "replace")
    major = version.split(".", 1)[0]
    return major.isdigit() and int(major) < 3


def as_micros(column: pa.Array, target: pa.DataType) -> pa.Array:
    """A timestamp ``column`` of any unit as ``target`` (a microsecond timestamp), floored to the microsecond."""
    unit = column.type.unit
    if unit == "ns":
        values = column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        valid = np.asarray(column.is_valid())
        floored = np.floor_divide(values, 1000)
        return pa.array(floored, pa.int64(), mask=~valid).cast(pa.timestamp("us")).cast(target)
    # seconds and milliseconds widen exactly; microseconds only change their time zone's name
    return column.cast(pa.timestamp("us", tz=column.type.tz)).cast(target)


def check_proleptic(column: pa.Array, where: str) -> None:
    """Raise `UnreadableValueError` when a date or timestamp ``column`` (or one inside a struct, array or map) of a
    legacy-calendar file holds a value before 1900, which Spark would shift by its session's calendar rules (see
    the module docstring)."""
    if isinstance(column, pa.ExtensionArray):
        column = column.storage
    if pa.types.is_struct(column.type):
        for index in range(column.type.num_fields):
            check_proleptic(column.field(index), where)
        return
    if pa.types.is_map(column.type):
        check_proleptic(column.keys, where)
        check_proleptic(column.items, where)
        return
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        check_proleptic(column.flatten(), where)
        return
    if pa.types.is_timestamp(column.type):
        floor, values = _LEGACY_FLOOR_MICROS, column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
    elif pa.types.is_date32(column.type):
        floor, values = _LEGACY_FLOOR_DAYS, column.cast(pa.int32())
    else:
        return
    earliest = pc.min(values).as_py()
    if earliest is not None and earliest < floor:
        raise UnreadableValueError(
            f"{where} holds dates or timestamps before 1900 written in Spark's legacy hybrid Julian calendar "
            f"(the file's metadata marks it so), which this reader does not rebase; read the table with Spark's "
            f"reader, or rewrite it with Spark 3 or later in the CORRECTED rebase mode."
        )
