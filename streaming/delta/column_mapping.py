"""Delta column mapping: the names (mode ``name``) or field ids (mode ``id``) a table's data files hold its columns
under, and the table's own (logical) names.

Once ``delta.columnMapping.mode`` is ``name`` or ``id`` (what Databricks sets when a column is renamed or dropped),
every field of the schema, nested ones too, carries ``delta.columnMapping.physicalName`` (the name in the files) and
``delta.columnMapping.id`` (the Parquet field id). A physical name never changes, so a file written at any version
is read with the pinned version's mapping: a renamed column keeps its values, a dropped one is not read, an added
one is NULL in older files. Mode ``id`` matches a file's top-level columns by field id where the file has them,
else by physical name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from streaming.delta.history import COLUMN_MAPPING_PROPERTY

#: Where a column-mapped table's schema names a field's name in the data files, and its Parquet field id.
PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
_PARQUET_FIELD_ID = b"PARQUET:field_id"


def mapping_mode(configuration: Any) -> str:
    """The table's column mapping mode: ``none``, ``name`` or ``id``."""
    mode = str((configuration or {}).get(COLUMN_MAPPING_PROPERTY, "none")).strip().lower()
    return mode or "none"


@dataclass(frozen=True)
class StoredColumn:
    """Where a logical column lies in the data files: the top-level name, and its type as stored under the
    physical names of its nested fields (the same layout as the logical type)."""

    name: str
    stored_type: pa.DataType
    field_id: int | None


class ColumnMapping:
    """The physical side of a table's logical ``schema`` (Arrow) under its Delta schema ``delta_schema`` (JSON)."""

    def __init__(self, mode: str, schema: pa.Schema, delta_schema: str | None) -> None:
        self.mode = mode
        self.stored: dict[str, StoredColumn] = {}
        described = {}
        if mode != "none" and delta_schema:
            described = {field["name"]: field for field in json.loads(delta_schema).get("fields", [])}
        for field in schema:
            entry = described.get(field.name)
            if not isinstance(entry, dict):
                self.stored[field.name] = StoredColumn(field.name, field.type, None)
                continue
            metadata = entry.get("metadata") or {}
            identity = metadata.get(FIELD_ID)
            self.stored[field.name] = StoredColumn(
                str(metadata.get(PHYSICAL_NAME, field.name)),
                _physical_type(field.type, entry.get("type")),
                identity if isinstance(identity, int) and not isinstance(identity, bool) else None,
            )

    @property
    def maps_names(self) -> bool:
        return self.mode != "none"

    def physical_name(self, logical: str) -> str:
        """The name partition values and files give the logical column ``logical``."""
        column = self.stored.get(logical)
        return column.name if column is not None else logical

    def in_file(self, logical: str, file_schema: pa.Schema) -> str | None:
        """The name of ``logical``'s column in a data file of ``file_schema``, None when the file lacks it."""
        column = self.stored.get(logical)
        if column is None:
            return logical if logical in file_schema.names else None
        if self.mode == "id" and column.field_id is not None:
            for field in file_schema:
                if field.metadata and field.metadata.get(_PARQUET_FIELD_ID) == str(column.field_id).encode():
                    return field.name
        return column.name if column.name in file_schema.names else None

    def stored_type(self, logical: str, logical_type: pa.DataType) -> pa.DataType:
        column = self.stored.get(logical)
        return column.stored_type if column is not None else logical_type


def _physical_field(field: pa.Field, described: Any) -> pa.Field:
    if not isinstance(described, dict):
        return field
    name = (described.get("metadata") or {}).get(PHYSICAL_NAME, field.name)
    return pa.field(name, _physical_type(field.type, described.get("type")), field.nullable)


def _physical_type(data_type: pa.DataType, described: Any) -> pa.DataType:
    """``data_type`` with every nested field under the physical name the Delta schema gives it."""
    if not isinstance(described, dict):
        return data_type
    if pa.types.is_struct(data_type) and described.get("type") == "struct":
        children = {child["name"]: child for child in described.get("fields", [])}
        return pa.struct([_physical_field(child, children.get(child.name)) for child in data_type])
    if (pa.types.is_list(data_type) or pa.types.is_large_list(data_type)) and described.get("type") == "array":
        element = data_type.value_field.with_type(_physical_type(data_type.value_type, described.get("elementType")))
        return pa.list_(element) if pa.types.is_list(data_type) else pa.large_list(element)
    if pa.types.is_map(data_type) and described.get("type") == "map":
        key = data_type.key_field.with_type(_physical_type(data_type.key_type, described.get("keyType")))
        item = data_type.item_field.with_type(_physical_type(data_type.item_type, described.get("valueType")))
        return pa.map_(key, item)
    return data_type
