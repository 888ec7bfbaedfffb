"""Checks of a dataset's commit files and conversion record before anything in them is trusted.

A commit file (``_mds_log/<N>.json``, `streaming.format.commit_log`) says which files an overwrite deletes and
is republished as ``index.json``; the conversion record (``mds_conversion.json``) is carried into the next
commit. Anyone who can write into a dataset's folder can plant either, so both get the checks ``index.json``
gets: every shard entry is checked as an index's (`check_shard_entry`: file names, sizes, counts, format), every
file named in ``added``/``removed`` or in a run record's ``files`` by the one path rule (`check_relative_path`),
a mirror run's ``audit`` holds only key digests, and every field has the type the writers give it. A failure
is a ``ValueError`` naming the file and the field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from streaming.format.index import check_shard_entry
from streaming.storage.url import check_relative_path

OPERATIONS = ("append", "overwrite", "replace")
#: A key's digest in a mirror run's audit (`streaming.convert.key_map`): 16 bytes as hex.
_KEY_DIGEST = re.compile(r"^[0-9a-f]{32}$")


def load_json(text: str | bytes, where: str) -> Any:
    """Parse ``text`` (any JSON file others can write: a commit, a conversion record, a Delta commit's line);
    JSONDecodeError when it is not (yet) JSON, a ValueError naming ``where`` for JSON Python will not read
    (nested past the recursion limit, an integer past the 4,300-digit conversion limit), never a bare
    RecursionError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as err:
        reason = "it nests too deeply" if isinstance(err, RecursionError) else str(err)
        raise ValueError(f"{where} is not JSON Python can read: {reason}.") from None


def load_commit(text: str, version: int, where: str) -> dict[str, Any]:
    """The checked body of commit ``version``, read from its file ``where``.

    Raises:
        json.JSONDecodeError: not JSON (a commit still being written, or torn by a crash).
        ValueError: JSON that is not a valid commit body.
    """
    return check_commit(load_json(text, where), version, where)


def check_commit(body: Any, version: int, where: str) -> dict[str, Any]:
    """``body`` if it is a valid body of commit ``version``, else ValueError naming ``where`` and the field.

    Both formats of `streaming.format.commit_log` are accepted: a change (``add``: shard entries, ``remove``: file
    names, ``record``, ``source_versions``) and an older log's whole state (``shards``, ``metadata``, and the names
    in ``added``/``removed``).
    """
    if not isinstance(body, dict):
        raise ValueError(f"Commit file {where} is not a commit: expected a JSON object, got {type(body).__name__}.")
    if body.get("version") != version or type(body.get("version")) is not int:
        raise ValueError(f"Commit file {where} says version {body.get('version')!r}, but its name says {version}.")
    if body.get("operation") not in OPERATIONS:
        raise ValueError(f"Commit file {where}: operation must be one of {OPERATIONS}, got {body.get('operation')!r}.")
    base = body.get("base_version", 0)
    if type(base) is not int or not 0 <= base < version:
        raise ValueError(f"Commit file {where}: base_version must be an integer below {version}, got {base!r}.")
    for key in ("remove", "added", "removed"):
        for name in _list(body, key, where):
            check_relative_path(name, f"Commit file {where}, {key}", "file name")
    whole_state = "shards" in body
    for number, shard in enumerate(_list(body, "shards" if whole_state else "add", where)):
        check_shard_entry(shard, f"{where} (commit)", number)
    committed_at = body.get("committed_at", 0)
    if type(committed_at) not in (int, float):
        raise ValueError(f"Commit file {where}: committed_at must be a number, got {committed_at!r}.")
    if body.get("metadata") is not None:
        check_conversion_record(body["metadata"], f"{where}, metadata")
    if body.get("record") is not None:
        _check_run(body["record"], f"{where}, record")
    check_source_versions(body.get("source_versions"), f"Commit file {where}")
    if "audit" in body:
        _check_audit(body["audit"], f"Commit file {where}, audit")
    return body


def _check_audit(audit: Any, where: str) -> None:
    """A mirror run's audit: the table version it reached and the digests of the keys it removed or replaced."""
    if not isinstance(audit, dict):
        raise ValueError(f"{where} must be a JSON object, got {type(audit).__name__}.")
    version = audit.get("table_version")
    if type(version) is not int or version < 0:
        raise ValueError(f"{where}: table_version must be a table version, got {version!r}.")
    key = audit.get("key")
    if not isinstance(key, list) or not all(isinstance(name, str) for name in key):
        raise ValueError(f"{where}: key must be a list of column names, got {key!r}.")
    for field in ("removed", "replaced"):
        digests = audit.get(field)
        if not isinstance(digests, list) or not all(
            isinstance(digest, str) and _KEY_DIGEST.match(digest) for digest in digests
        ):
            raise ValueError(f"{where}: {field} must be a list of 32-digit hex key digests.")


def check_checkpoint(body: Any, version: int, where: str) -> dict[str, Any]:
    """``body`` if it is a valid checkpoint of the state at ``version``, else ValueError naming ``where``."""
    if not isinstance(body, dict) or body.get("version") != version or type(body.get("version")) is not int:
        raise ValueError(f"Checkpoint {where} is not the state at version {version}.")
    if "shards" not in body:
        raise ValueError(f"Checkpoint {where} holds no shard list.")
    for number, shard in enumerate(_list(body, "shards", where)):
        check_shard_entry(shard, f"{where} (checkpoint)", number)
    if body.get("metadata") is not None:
        check_conversion_record(body["metadata"], f"{where}, metadata")
    check_source_versions(body.get("source_versions"), f"Checkpoint {where}")
    return body


def check_source_versions(versions: Any, where: str) -> None:
    """``source_versions`` must map source names to table versions."""
    if versions is None:
        return
    if not isinstance(versions, dict) or not all(
        isinstance(name, str) and type(number) is int and number >= 0 for name, number in versions.items()
    ):
        raise ValueError(f"{where}: source_versions must map source names to table versions, got {versions!r}.")


def _list(body: dict[str, Any], key: str, where: str) -> list[Any]:
    items = body.get(key, [])
    if not isinstance(items, list):
        raise ValueError(f"Commit file {where}: {key} must be a list, got {type(items).__name__}.")
    return items


def check_conversion_record(record: Any, where: str) -> dict[str, Any]:
    """``record`` if it has the shape `streaming.convert.driver` writes (``runs``: a list of run records,
    ``latest``: one), else ValueError naming ``where`` and the field."""
    if not isinstance(record, dict):
        raise ValueError(f"Conversion record {where} is not a JSON object.")
    runs = record.get("runs", [])
    if not isinstance(runs, list):
        raise ValueError(f"Conversion record {where}: runs must be a list, got {type(runs).__name__}.")
    for number, run in enumerate(runs):
        _check_run(run, f"{where}, runs[{number}]")
    if record.get("latest") is not None:
        _check_run(record["latest"], f"{where}, latest")
    return record


def _check_run(run: Any, where: str) -> None:
    if not isinstance(run, dict):
        raise ValueError(f"Conversion record {where} is not a JSON object.")
    if not isinstance(run.get("run", ""), str):
        raise ValueError(f"Conversion record {where}: run must be a string, got {run.get('run')!r}.")
    files = run.get("files", [])
    if not isinstance(files, list):
        raise ValueError(f"Conversion record {where}: files must be a list, got {type(files).__name__}.")
    for name in files:
        check_relative_path(name, f"Conversion record {where}, files", "file name")
    source = run.get("source")
    if source is None:
        return
    if not isinstance(source, dict):
        raise ValueError(f"Conversion record {where}: source must be a JSON object, got {type(source).__name__}.")
    version = source.get("version")
    if version is not None and (type(version) is not int or version < 0):
        raise ValueError(f"Conversion record {where}: source.version must be a table version, got {version!r}.")
