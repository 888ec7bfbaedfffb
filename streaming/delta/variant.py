"""A VARIANT column as the JSON text Spark's ``to_json`` gives it, decoded from the Parquet variant encoding.

Delta's ``variantType`` feature (``variantType-preview`` before Delta 4.0) stores a VARIANT as a Parquet group of
two binaries, ``metadata`` (a dictionary of the object keys) and ``value`` (the value, its keys as indices into
that dictionary), laid out as Parquet's VariantEncoding.md specifies. With ``variantShredding-preview`` a writer
may also shred it: the group gains a ``typed_value`` of a plain Parquet type (a primitive, a group of fields
for an object, a list for an array), each nested field again a ``value``/``typed_value`` pair
(VariantShredding.md); a value that does not fit the typed column stays in ``value``, and an object's fields
outside the typed ones stay in ``value`` too.

Spark's path (`streaming.spark.schema.select_expressions`) stores a VARIANT as ``to_json(v)``, which is Spark's
``Variant.toJson``; this module writes the same text from the same bytes: objects in the order the encoding gives
(sorted by key; a shredded object's fields, rebuilt, sorted likewise), numbers as Java prints them (``1.0E10``,
decimals in plain notation without trailing zeros, NaN and infinities quoted), dates as ``yyyy-mm-dd``, timestamps as
``yyyy-mm-dd hh:mm:ss[.ffffff]`` with ``+00:00`` (this reader renders in UTC; Spark in its session time zone,
which is UTC where the two are compared), binaries in Base64, strings escaped as Jackson escapes them.

Refused, naming the column and file, where Spark 4.0's reader gives no text either or the encoding is damaged:
the variant types the spec added after Spark 4.0 (time of day, nanosecond timestamps), a metadata version other
than 1, an offset or length beyond its buffer, a value nested deeper than `MAX_DEPTH`, and a shredded value whose
``value`` and ``typed_value`` are both set but are not an object's disjoint fields (the spec leaves it invalid).
A VARIANT inside a struct, array or map is refused where the scan is made (`nested_variants`), as Spark's path
refuses it.
"""

from __future__ import annotations

import base64
import datetime
import json
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from streaming.delta.errors import UnreadableValueError

#: The deepest nesting of arrays and objects decoded: Jackson's default bound, which Spark's ``parse_json`` keeps.
MAX_DEPTH = 1000
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_DAY_MICROS = 86_400_000_000


class _Damaged(Exception):
    """A value or metadata buffer that does not hold what the encoding says (turned into `UnreadableValueError`
    with the column's name where it is read)."""


def variant_columns(delta_schema: str | None) -> frozenset[str]:
    """The table's top-level VARIANT columns, from its Delta schema (JSON)."""
    return frozenset(field["name"] for field in _fields(delta_schema) if field.get("type") == "variant")


def nested_variants(delta_schema: str | None) -> frozenset[str]:
    """The table's top-level columns that hold a VARIANT inside a struct, array or map."""
    return frozenset(
        field["name"]
        for field in _fields(delta_schema)
        if isinstance(field.get("type"), dict) and "variant" in _leaf_types(field["type"])
    )


def text_schema(schema: pa.Schema, delta_schema: str | None) -> pa.Schema:
    """``schema`` (delta-rs's Arrow schema) with each top-level VARIANT column as JSON text (``arrow.json``)."""
    variants = variant_columns(delta_schema)
    if not variants:
        return schema
    return pa.schema([field.with_type(pa.json_()) if field.name in variants else field for field in schema])


def json_texts(column: pa.Array, where: str) -> pa.Array:
    """A file's VARIANT ``column`` (its Parquet group, shredded or not) as JSON text; ``where`` names the file and
    column in an error."""
    if isinstance(column, pa.ExtensionArray):  # a reader that knows Parquet's VARIANT annotation
        column = column.storage
    names = [column.type.field(index).name for index in range(column.type.num_fields)]
    if "metadata" not in names or not ({"value", "typed_value"} & set(names)):
        raise UnreadableValueError(f"{where} is not a variant group (its fields: {', '.join(names)})")
    metadata = column.field("metadata").to_pylist()
    values = column.field("value").to_pylist() if "value" in names else [None] * len(column)
    typed_type = column.type.field("typed_value").type if "typed_value" in names else None
    typed = column.field("typed_value").to_pylist() if typed_type is not None else [None] * len(column)
    present = column.is_valid().to_pylist()
    dictionaries: dict[bytes, list[str]] = {}
    texts: list[str | None] = []
    try:
        for row, valid in enumerate(present):
            if not valid:
                texts.append(None)
                continue
            raw = metadata[row]
            if raw is None:
                raise _Damaged("a row has no variant metadata")
            keys = dictionaries.get(raw)
            if keys is None:
                keys = dictionaries[raw] = _dictionary(raw)
            text = _group(values[row], typed[row], typed_type, keys, 0)
            texts.append("null" if text is None else text)
    except _Damaged as err:
        raise UnreadableValueError(f"{where} holds a variant that cannot be read: {err}") from None
    except RecursionError:  # a shredding schema nested hundreds of groups deep
        raise UnreadableValueError(f"{where} is a shredded variant nested too deep to read here") from None
    return pa.ExtensionArray.from_storage(pa.json_(), pa.array(texts, pa.string()))


# -- the encoding (VariantEncoding.md) ------------------------------------------------------------------------------


def _dictionary(metadata: bytes) -> list[str]:
    """The keys a metadata buffer holds."""
    if not metadata or metadata[0] & 0x0F != 1:
        raise _Damaged("its metadata is not of variant encoding version 1")
    width = ((metadata[0] >> 6) & 0x03) + 1
    count = _unsigned(metadata, 1, width)
    start = 1 + width
    strings = start + (count + 1) * width
    if strings > len(metadata):
        raise _Damaged(f"its metadata declares {count} keys but holds {len(metadata)} bytes")
    keys = []
    previous = _unsigned(metadata, start, width)
    for index in range(1, count + 1):
        offset = _unsigned(metadata, start + index * width, width)
        if not previous <= offset <= len(metadata) - strings:
            raise _Damaged("a key of its metadata lies outside it")
        keys.append(_utf8(metadata[strings + previous : strings + offset]))
        previous = offset
    return keys


def _value(data: bytes, pos: int, keys: list[str], depth: int) -> str:
    """The JSON text of the value at ``pos``, ``depth`` containers down (a loop over a stack of pending pieces,
    not recursion: Spark's ``parse_json`` nests up to 1,000 deep)."""
    out: list[str] = []
    pending: list[tuple[int, int] | str] = [(pos, depth)]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        at, level = item
        header = _byte(data, at)
        basic, info = header & 0x03, header >> 2
        if basic == 1:  # a short string: its length in the header
            out.append(_string(_utf8(_slice(data, at + 1, info))))
            continue
        if basic == 0:
            out.append(_primitive(data, at + 1, info))
            continue
        if level >= MAX_DEPTH:
            raise _Damaged(f"it nests arrays and objects more than {MAX_DEPTH} deep")
        if basic == 2:
            entries = [(_string(key) + ":", element) for key, element in _object_entries(data, at, keys)]
            close = "}"
        else:
            size, offsets, start = _container(data, at, info & 0x03, (info >> 2) & 0x01, 0)
            entries = [("", start + offset) for offset in offsets[:size]]
            close = "]"
        pending.append(close)
        for index in range(len(entries) - 1, -1, -1):
            prefix, element = entries[index]
            pending.append((element, level + 1))
            pending.append(("," if index else "") + prefix)
        out.append("{" if basic == 2 else "[")
    return "".join(out)


def _object_entries(data: bytes, pos: int, keys: list[str]) -> list[tuple[str, int]]:
    """An object's keys and where each value starts, in stored order (``pos`` must be an object's header)."""
    info = _byte(data, pos) >> 2
    id_width = ((info >> 2) & 0x03) + 1
    size, offsets, start = _container(data, pos, info & 0x03, (info >> 4) & 0x01, id_width)
    first_id = pos + 1 + (4 if (info >> 4) & 0x01 else 1)
    entries = []
    for index in range(size):
        key_id = _unsigned(data, first_id + index * id_width, id_width)
        if key_id >= len(keys):
            raise _Damaged(f"an object names key {key_id} of a dictionary of {len(keys)}")
        entries.append((keys[key_id], start + offsets[index]))
    return entries


def _container(data: bytes, pos: int, width_code: int, large: int, id_width: int) -> tuple[int, list[int], int]:
    """An object's or array's element count, its element offsets and where its values start."""
    width = width_code + 1
    count_width = 4 if large else 1
    size = _unsigned(data, pos + 1, count_width)
    table = pos + 1 + count_width + size * id_width
    start = table + (size + 1) * width
    if start > len(data):
        raise _Damaged(f"a container declares {size} elements beyond its value's {len(data)} bytes")
    offsets = [_unsigned(data, table + index * width, width) for index in range(size + 1)]
    if any(start + offset >= len(data) for offset in offsets[:size]):
        raise _Damaged("an element lies outside its value")
    return size, offsets, start


def _primitive(data: bytes, pos: int, type_id: int) -> str:
    """A primitive's JSON text (type ids of VariantEncoding.md's table)."""
    if type_id in _FIXED:
        width, text = _FIXED[type_id]
        return text(_slice(data, pos, width))
    if type_id in (8, 9, 10):  # decimal4, decimal8, decimal16: a scale byte, then the unscaled value
        width = {8: 4, 9: 8, 10: 16}[type_id]
        return _plain_decimal(int.from_bytes(_slice(data, pos + 1, width), "little", signed=True), _byte(data, pos))
    if type_id in (15, 16):  # binary, string: a 4-byte length, then the bytes
        raw = _slice(data, pos + 4, _unsigned(data, pos, 4))
        return _quoted(base64.b64encode(raw).decode("ascii")) if type_id == 15 else _string(_utf8(raw))
    if type_id in (17, 18, 19):
        kind = {17: "a time of day", 18: "a nanosecond timestamp", 19: "a nanosecond timestamp without time zone"}
        raise _Damaged(f"it holds {kind[type_id]}, a variant type Spark 4.0's reader does not read either")
    raise _Damaged(f"it holds an unknown primitive type {type_id}")


def _signed(raw: bytes) -> int:
    return int.from_bytes(raw, "little", signed=True)


_FIXED: dict[int, tuple[int, Callable[[bytes], str]]] = {
    0: (0, lambda raw: "null"),
    1: (0, lambda raw: "true"),
    2: (0, lambda raw: "false"),
    3: (1, lambda raw: str(_signed(raw))),
    4: (2, lambda raw: str(_signed(raw))),
    5: (4, lambda raw: str(_signed(raw))),
    6: (8, lambda raw: str(_signed(raw))),
    7: (8, lambda raw: _java_number(float(np.frombuffer(raw, "<f8")[0]), single=False)),
    11: (4, lambda raw: _quoted(_date(_signed(raw)))),
    12: (8, lambda raw: _quoted(_timestamp(_signed(raw)) + "+00:00")),
    13: (8, lambda raw: _quoted(_timestamp(_signed(raw)))),
    14: (4, lambda raw: _java_number(float(np.frombuffer(raw, "<f4")[0]), single=True)),
    20: (16, lambda raw: _quoted(str(uuid.UUID(bytes=bytes(raw))))),
}


# -- shredding (VariantShredding.md) --------------------------------------------------------------------------------


def _group(value: bytes | None, typed: Any, typed_type: pa.DataType | None, keys: list[str], depth: int) -> str | None:
    """The JSON text of a (possibly shredded) value/typed_value pair; None when both are missing (an object's
    field that is absent)."""
    if typed is None:
        return None if value is None else _value(value, 0, keys, depth)
    assert typed_type is not None
    if value is None:
        return _typed(typed, typed_type, keys, depth)
    # Both: a partially shredded object, the fields outside typed_value in value.
    if not pa.types.is_struct(typed_type) or _byte(value, 0) & 0x03 != 2:
        raise _Damaged("a shredded value is in both value and typed_value, and is not an object")
    fields = dict(_typed_fields(typed, typed_type, keys, depth))
    for key, element in _object_entries(value, 0, keys):
        if key in fields:
            raise _Damaged(f"a shredded object holds the field {key!r} twice")
        fields[key] = _value(value, element, keys, depth + 1)
    return _object_text(fields)


def _typed(typed: Any, typed_type: pa.DataType, keys: list[str], depth: int) -> str:
    """The JSON text of a shredded ``typed_value`` of Arrow type ``typed_type``."""
    if isinstance(typed_type, pa.ExtensionType):
        typed_type = typed_type.storage_type
    if depth >= MAX_DEPTH:
        raise _Damaged(f"it nests arrays and objects more than {MAX_DEPTH} deep")
    if pa.types.is_struct(typed_type):
        return _object_text(dict(_typed_fields(typed, typed_type, keys, depth)))
    if pa.types.is_list(typed_type) or pa.types.is_large_list(typed_type):
        element = typed_type.value_type
        texts = []
        for item in typed:
            text = _group(*_pair(item, element), keys, depth + 1)
            if text is None:
                raise _Damaged("a shredded array's element is missing")
            texts.append(text)
        return "[" + ",".join(texts) + "]"
    return _typed_primitive(typed, typed_type)


def _typed_fields(
    typed: dict[str, Any], typed_type: pa.StructType, keys: list[str], depth: int
) -> list[tuple[str, str]]:
    fields = []
    for field in typed_type:
        text = _group(*_pair(typed.get(field.name), field.type), keys, depth + 1)
        if text is not None:
            fields.append((field.name, text))
    return fields


def _pair(group: dict[str, Any] | None, group_type: pa.DataType) -> tuple[bytes | None, Any, pa.DataType | None]:
    """A shredded field's or element's ``value``, ``typed_value`` and the latter's type."""
    if group is None:
        return None, None, None
    typed_type = None
    if pa.types.is_struct(group_type) and group_type.get_field_index("typed_value") >= 0:
        typed_type = group_type.field("typed_value").type
    return group.get("value"), group.get("typed_value"), typed_type


def _object_text(fields: dict[str, str]) -> str:
    """An object rebuilt from shredded fields, its keys sorted as Spark's variant builder sorts them (by UTF-16)."""
    ordered = sorted(fields, key=lambda key: key.encode("utf-16-be"))
    return "{" + ",".join(f"{_string(key)}:{fields[key]}" for key in ordered) + "}"


def _typed_primitive(value: Any, data_type: pa.DataType) -> str:
    """A shredded primitive's JSON text, as the variant value it stands for would print."""
    if pa.types.is_boolean(data_type):
        return "true" if value else "false"
    if pa.types.is_integer(data_type):
        return str(value)
    if pa.types.is_floating(data_type):
        return _java_number(float(value), single=pa.types.is_float32(data_type))
    if pa.types.is_decimal(data_type):
        sign, digits, exponent = Decimal(value).as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        return _plain_decimal(unscaled * 10 ** (int(exponent) + data_type.scale), data_type.scale)
    if pa.types.is_date32(data_type):
        return _quoted(value.isoformat())
    if pa.types.is_timestamp(data_type) and data_type.unit == "us":
        if data_type.tz is None:
            micros = (value.replace(tzinfo=datetime.timezone.utc) - _EPOCH) // datetime.timedelta(microseconds=1)
            return _quoted(_timestamp(micros))
        micros = (value - _EPOCH) // datetime.timedelta(microseconds=1)
        return _quoted(_timestamp(micros) + "+00:00")
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return _string(value)
    if pa.types.is_fixed_size_binary(data_type) and data_type.byte_width == 16:
        return _quoted(str(uuid.UUID(bytes=bytes(value))))
    if pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return _quoted(base64.b64encode(value).decode("ascii"))
    if isinstance(value, uuid.UUID):
        return _quoted(str(value))
    raise _Damaged(f"a shredded typed_value of type {data_type}, which Spark 4.0's reader does not read either")


# -- text as Java and Jackson print it ------------------------------------------------------------------------------


def _java_number(value: float, single: bool) -> str:
    """``value`` as Java's ``Double.toString`` (``Float.toString`` when ``single``) prints it; NaN and the
    infinities quoted, as Spark quotes them."""
    if value != value:
        return '"NaN"'
    if value in (float("inf"), float("-inf")):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    sign = "-" if np.signbit(value) else ""
    if value == 0:
        return sign + "0.0"
    shortest = str(np.float32(abs(value))) if single else repr(abs(value))
    _, digit_tuple, exponent = Decimal(shortest).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)  # the value is 0.<digits> x 10^point
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _plain_decimal(unscaled: int, scale: int) -> str:
    """A decimal in plain notation without trailing zeros after the point (Spark reads a variant's decimal with
    ``stripTrailingZeros`` and prints it with ``toPlainString``: ``1.50`` as ``1.5``, ``100`` as ``100``)."""
    sign, digits = ("-" if unscaled < 0 else ""), str(abs(unscaled))
    if scale <= 0:
        return sign + digits + "0" * -scale if unscaled else "0"
    digits = digits.rjust(scale + 1, "0")
    fraction = digits[-scale:].rstrip("0")
    return f"{sign}{digits[:-scale]}.{fraction}" if fraction else f"{sign}{digits[:-scale]}"


def _date(days: int) -> str:
    """A day count since 1970-01-01 as Java's ``LocalDate.toString`` (a sign beyond year 9999 or before 0)."""
    year, month, day = _civil(days)
    text = f"{abs(year):04d}"
    if year > 9999:
        text = "+" + text
    elif year < 0:
        text = "-" + text
    return f"{text}-{month:02d}-{day:02d}"


def _timestamp(micros: int) -> str:
    """Microseconds since the epoch as ``yyyy-mm-dd hh:mm:ss[.fraction]``, trailing zeros of the fraction cut."""
    days, of_day = divmod(micros, _DAY_MICROS)
    seconds, fraction = divmod(of_day, 1_000_000)
    text = f"{_date(days)} {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{fraction:06d}".rstrip("0") if fraction else "")


def _civil(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of a day count since 1970-01-01, for any year."""
    shifted = days + 719468
    era = shifted // 146097
    of_era = shifted - era * 146097
    year_of_era = (of_era - of_era // 1460 + of_era // 36524 - of_era // 146096) // 365
    of_year = of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * of_year + 2) // 153
    day = of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (1 if month <= 2 else 0), month, day


def _string(text: str) -> str:
    """A JSON string as Jackson writes it: quotes, backslashes and control characters escaped, nothing else."""
    return '"' + "".join(_ESCAPES.get(char, char) for char in text) + '"'


def _quoted(text: str) -> str:
    return f'"{text}"'


_ESCAPES = {chr(code): f"\\u{code:04X}" for code in range(0x20)}
_ESCAPES.update({'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"})


# -- bytes ----------------------------------------------------------------------------------------------------------


def _byte(data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise _Damaged("a value ends early")
    return data[pos]


def _slice(data: bytes, pos: int, length: int) -> bytes:
    if pos + length > len(data):
        raise _Damaged("a value ends early")
    return data[pos : pos + length]


def _unsigned(data: bytes, pos: int, width: int) -> int:
    return int.from_bytes(_slice(data, pos, width), "little")


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged("a string is not UTF-8") from None


def _fields(delta_schema: str | None) -> list[dict[str, Any]]:
    if not delta_schema:
        return []
    fields = json.loads(delta_schema).get("fields", [])
    return [field for field in fields if isinstance(field, dict)]


def _leaf_types(described: Any) -> set[str]:
    """Every type name inside a Delta schema type (struct fields, array elements, map keys and values)."""
    if isinstance(described, str):
        return {described}
    if not isinstance(described, dict):
        return set()
    found: set[str] = set()
    for field in described.get("fields", []):
        if isinstance(field, dict):
            found |= _leaf_types(field.get("type"))
    for part in ("elementType", "keyType", "valueType"):
        found |= _leaf_types(described.get(part))
    return found
