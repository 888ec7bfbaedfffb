"""`Source`: where a conversion's rows came from, as its record and its NULL counting need to know."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Source:
    """Where the converted rows came from.

    Attributes:
        kind: ``"dataframe"``, ``"table"``, ``"delta"``, or the command line's input kinds (``"parquet"``, ...).
        name: the table name or path, when there is one.
        version: the Delta table version converted, when the input is a Delta table.
        reader: what read it (``"spark"``, ``"deltalake"``, ``"pyarrow"``).
    """

    kind: str
    name: str | None = None
    version: int | None = None
    reader: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "version": self.version, "reader": self.reader}
