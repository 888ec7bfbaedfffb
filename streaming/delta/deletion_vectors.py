"""Delta deletion vectors: the positions of a data file's rows that its ``add`` action marks deleted.

A deletion vector (PROTOCOL.md, "Deletion Vector Format") is a 64-bit RoaringBitmap of row positions in the
portable serialization, after a 4-byte little-endian magic number. It lies inline in the log (``storageType``
``i``: Z85 text) or in a file of the table (``u``: a path derived from a Z85-encoded UUID; ``p``: an absolute
path), where it follows its big-endian size at ``offset`` and is followed by its big-endian CRC-32. pyroaring
decodes the bitmap.

A mirror keyed by Delta row ids needs this: a row's default id is its file's ``baseRowId`` plus its position in the
file as written, deleted rows included, so a file's rows are read whole and the deleted positions dropped after.

Everything is checked, as the log is untrusted: the magic number, the size the file states against the
descriptor's, the checksum, the cardinality, and that every position lies in the file.
"""

from __future__ import annotations

import base64
import struct
import uuid
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from streaming._extras import require
from streaming.delta.errors import DeletionVectorError

#: The magic number before every serialized deletion vector.
MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_B85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
#: Z85 and Python's base85 differ only in their alphabets: Z85 text is decoded by translating it.
_FROM_Z85 = str.maketrans(_Z85, _B85)


def z85_decode(text: str) -> bytes:
    """The bytes of Z85 ``text`` (ZeroMQ's RFC 32 alphabet)."""
    if len(text) % 5 or any(char not in _Z85 for char in text):
        raise DeletionVectorError(f"{text[:40]!r} is not Z85 text")
    return base64.b85decode(text.translate(_FROM_Z85))


def deleted_positions(descriptor: Mapping[str, Any], rows: int, filesystem: Any, where: str) -> np.ndarray:
    """The sorted positions (int64) among a file's ``rows`` that ``descriptor`` marks deleted.

    ``filesystem`` is a pyarrow filesystem rooted at the table (for vectors stored in files); ``where`` names the
    data file in errors. Raises `DeletionVectorError` for a vector that is damaged or not the descriptor's.
    """
    kind = descriptor.get("storageType")
    size = descriptor.get("sizeInBytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 4:
        raise DeletionVectorError(f"the deletion vector of {where} has sizeInBytes {size!r}")
    if kind == "i":
        data = z85_decode(str(descriptor.get("pathOrInlineDv", "")))[:size]
    elif kind == "u":
        data = _stored(filesystem, _relative_path(str(descriptor.get("pathOrInlineDv", ""))), descriptor, size, where)
    else:  # "p": an absolute path, as a shallow clone's files are: not read from outside the table here
        raise DeletionVectorError(f"the deletion vector of {where} has storageType {kind!r}, which is not read here")
    if len(data) != size or struct.unpack_from("<I", data)[0] != MAGIC:
        raise DeletionVectorError(f"the deletion vector of {where} is not in the Delta format (magic number)")
    bitmap_type = require("pyroaring", "delta", "Reading Delta deletion vectors").BitMap64
    try:
        bitmap = bitmap_type.deserialize(data[4:])
    except Exception as err:  # noqa: BLE001 - pyroaring's own errors for a damaged bitmap
        raise DeletionVectorError(f"the deletion vector of {where} is damaged ({err})") from None
    # Checked before the positions are listed: a few bytes of runs can stand for billions of them.
    cardinality = descriptor.get("cardinality")
    if cardinality != len(bitmap) or (len(bitmap) and bitmap.max() >= rows):
        raise DeletionVectorError(
            f"the deletion vector of {where} marks {len(bitmap)} positions (cardinality {cardinality!r}) for "
            f"a file of {rows} rows"
        )
    return np.fromiter(bitmap, dtype=np.int64, count=len(bitmap))


def _relative_path(text: str) -> str:
    """A ``u`` vector's file, relative to the table: ``<prefix>/deletion_vector_<uuid>.bin``."""
    if len(text) < 20:
        raise DeletionVectorError(f"{text!r} is not a deletion vector's path")
    prefix, encoded = text[:-20], text[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    if prefix and not prefix.isalnum():
        raise DeletionVectorError(f"{text!r} is not a deletion vector's path")
    return f"{prefix}/{name}" if prefix else name


def _stored(filesystem: Any, path: str, descriptor: Mapping[str, Any], size: int, where: str) -> bytes:
    """The vector's bytes from its file: the size the file states, the data, then its checksum, all checked."""
    offset = descriptor.get("offset") or 0
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 1:
        raise DeletionVectorError(f"the deletion vector of {where} has offset {offset!r}")
    with filesystem.open_input_file(path) as handle:
        if offset + 4 + size + 4 > handle.size():
            raise DeletionVectorError(f"the deletion vector of {where} lies past the end of {path}")
        handle.seek(offset)
        stated, data, checksum = handle.read(4), handle.read(size), handle.read(4)
    if struct.unpack(">I", stated)[0] != size or struct.unpack(">I", checksum)[0] != zlib.crc32(data):
        raise DeletionVectorError(f"the deletion vector of {where} in {path} fails its size or checksum check")
    return data
