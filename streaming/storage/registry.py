"""Which backend serves a URL: the one public table of URL scheme → `Storage` class, and `storage_for(url)`.

Every built-in scheme is registered here, each with the ``mds-streaming`` extra that installs its SDK; a
package adds its own with `register_backend` (as fsspec's ``register_implementation`` and litdata's
``register_downloader`` do), naming the class itself or ``"module:Class"`` to import on first use::

    register_backend("myfs", "my_package.storage:MyStorage", extra=None)

``/Volumes/...`` and ``dbfs:/Volumes/...`` are routed by where the volume is: plain file I/O when it is mounted
here (a Databricks cluster), the Databricks Files API otherwise. Backends are cached per scheme, bucket or
account, relevant environment and process, so a forked or spawned DataLoader worker builds its own clients.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import os
import threading
from dataclasses import dataclass

from streaming._extras import install_hint
from streaming.storage.base import Storage
from streaming.storage.url import check_segments, split_url

#: Set to ``local`` to read and write every ``/Volumes/...`` path as a local path (never the Files API).
VOLUMES_ENV = "MDS_STREAMING_VOLUMES"


@dataclass(frozen=True)
class _Backend:
    """A registered backend: the class, or where to import it from, and the extra that installs its SDK."""

    target: type[Storage] | str
    extra: str | None

    def load(self, url: str) -> type[Storage]:
        if not isinstance(self.target, str):
            return self.target
        module_name, _, class_name = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            hint = f" {install_hint(self.extra)}" if self.extra else ""
            raise ImportError(f"The storage backend for {url!r} could not be imported ({err}).{hint}") from err
        return getattr(module, class_name)


_BACKENDS: dict[str, _Backend] = {}
#: The Files API backend, for ``/Volumes`` paths whose volume is not mounted here (not a scheme of its own).
_VOLUMES = _Backend("streaming.storage.databricks:VolumesStorage", "databricks")
# Schemes upstream knows that are deliberately not served, with what to use instead.
_UNSUPPORTED = {
    "alipan": (
        "Aliyun Drive (alipan://) is not supported by mds-streaming; copy the dataset to a supported store "
        "(s3://, gs://, azure://, oci://, sftp://, hf://datasets/, dbfs:/Volumes/) or to a local directory"
    ),
}
_CACHE: dict[tuple, Storage] = {}
_CACHE_LOCK = threading.Lock()


def register_backend(
    scheme: str, backend: type[Storage] | str, *, extra: str | None = None, clobber: bool = False
) -> None:
    """Serve URLs of ``scheme`` (``"s3"`` for ``s3://...``; ``""`` for local paths) with ``backend``.

    Args:
        scheme: the URL scheme, lower case.
        backend: a `Storage` subclass, or ``"module:Class"`` imported when a URL of the scheme is first used.
        extra: the ``mds-streaming`` extra that installs what the backend needs, named when it cannot be imported.
        clobber: replace a backend already registered for the scheme (otherwise that is a ValueError).
    """
    scheme = scheme.lower()
    if scheme in _BACKENDS and not clobber and _BACKENDS[scheme].target != backend:
        raise ValueError(f"Scheme {scheme!r} already has a storage backend; pass clobber=True to replace it.")
    if not isinstance(backend, str) and not (isinstance(backend, type) and issubclass(backend, Storage)):
        raise TypeError(f"backend must be a Storage subclass or a 'module:Class' string, got {backend!r}.")
    _BACKENDS[scheme] = _Backend(backend, extra)
    clear_storage_cache()


def registered_schemes() -> list[str]:
    """Every scheme a backend is registered for (``""`` and ``"file"`` are local paths)."""
    return sorted(_BACKENDS)


def volume_mount(url: str) -> str | None:
    """The local path of a `/Volumes/...` or `dbfs:/Volumes/...` URL when its volume is mounted here, else None."""
    location = split_url(url)
    if location.scheme not in ("", "dbfs"):
        return None
    path = location.key
    parts = path.split("/")
    if len(parts) < 5 or parts[0] != "" or parts[1] != "Volumes":
        return None
    return path if os.path.isdir("/".join(parts[:5])) else None


def volumes_via_api(url: str) -> bool:
    """Whether a ``/Volumes/...`` path (not ``dbfs:``) goes to the Databricks Files API.

    Only a path shaped ``/Volumes/<catalog>/<schema>/<volume>/...`` that does not exist locally does (so a
    macOS disk under ``/Volumes`` stays local), and never when ``MDS_STREAMING_VOLUMES=local``.
    """
    location = split_url(url)
    if location.scheme not in ("", "file") or not location.key.startswith("/Volumes/"):
        return False
    if os.environ.get(VOLUMES_ENV, "").lower() == "local":
        return False
    parts = location.key.split("/")
    if len(parts) < 5 or not all(parts[2:5]):
        return False
    return volume_mount(url) is None and not os.path.exists(location.key)


def refuse_unsupported(url: str) -> None:
    """Raise ValueError naming the alternatives when `url` has a scheme upstream knows but this package refuses."""
    scheme = split_url(url).scheme
    if scheme in _UNSUPPORTED:
        raise ValueError(f"Unsupported storage URL {url!r}: {_UNSUPPORTED[scheme]}.")


def _route(url: str) -> tuple[str, _Backend]:
    """The registered backend serving `url`, and the name of its route (``"local"``, ``"volumes"``, or the scheme)."""
    location = split_url(url)
    refuse_unsupported(url)
    check_segments(url)
    scheme = location.scheme
    if location.key.startswith("/Volumes/") and scheme in ("", "file", "dbfs"):
        mounted = volume_mount(url) if scheme == "dbfs" else not volumes_via_api(url)
        return ("local", _BACKENDS[""]) if mounted else ("volumes", _VOLUMES)
    backend = _BACKENDS.get(scheme)
    if backend is None:
        valid = ", ".join(sorted(f"{s}://" for s in _BACKENDS if s not in ("", "dbfs")) + ["dbfs:/", "local paths"])
        raise ValueError(
            f"Unsupported storage URL {url!r}: unknown scheme {scheme!r}{did_you_mean(url)}. Valid choices: {valid}."
        )
    # Local paths and file:// URLs share one backend instance.
    return ("local" if scheme in ("", "file") else scheme), backend


#: Schemes people write for a registered one (Google's own tools say gs://).
_MISTAKEN_SCHEMES = {"gcs": "gs", "gcp": "gs", "google": "gs", "abs": "azure", "blob": "azure"}


def did_you_mean(url: str) -> str:
    """`` (did you mean 'gs://b/x'?)`` for a URL whose unregistered scheme is close to a registered one; else ``""``."""
    scheme = split_url(url).scheme
    if not scheme or scheme in _BACKENDS:
        return ""
    close = _MISTAKEN_SCHEMES.get(scheme) or next(
        iter(difflib.get_close_matches(scheme, [s for s in _BACKENDS if len(s) > 1], n=1, cutoff=0.5)), None
    )
    return f" (did you mean {close + url[len(scheme) :]!r}?)" if close else ""


def storage_for(url: str) -> Storage:
    """The backend for `url`, chosen by scheme and cached per (scheme, netloc, environment, process).

    `/Volumes/...` and `dbfs:/Volumes/...` use plain file I/O when the volume is mounted here, else the
    Databricks Files API. Unknown schemes raise ValueError listing the valid ones.
    """
    return _cached(*_route(url), url)


def exclusive_storage_for(url: str) -> Storage:
    """The backend whose create-only write (`Storage.put_if_absent`) of `url` is exclusive across machines.

    A Unity Catalog volume's FUSE mount has no ``link()``, and its ``O_CREAT | O_EXCL`` is exclusive on one node
    only (a file becomes visible to the other nodes when it is closed), while the Files API's no-overwrite upload
    is exclusive across the whole workspace and publishes the file with its whole body. So a mounted
    ``/Volumes/...`` path is created through the Files API when the Databricks API is configured here (a
    Databricks runtime, or ``DATABRICKS_HOST``) and ``MDS_STREAMING_VOLUMES`` is not ``local``; every other URL
    uses `storage_for`.
    """
    location = split_url(url)
    mounted = location.scheme in ("", "file", "dbfs") and volume_mount(url) is not None
    if mounted and os.environ.get(VOLUMES_ENV, "").lower() != "local" and _databricks_api_configured():
        return _cached("volumes", _VOLUMES, url)
    return storage_for(url)


def _databricks_api_configured() -> bool:
    """Whether the databricks-sdk has a workspace to talk to here (a runtime's context, or a host set)."""
    return any(os.environ.get(name) for name in ("DATABRICKS_RUNTIME_VERSION", "DATABRICKS_HOST"))


def _cached(route: str, entry: _Backend, url: str) -> Storage:
    backend = entry.load(url)
    key = (os.getpid(), route, backend, backend.cache_key(url), env_fingerprint(backend.env_vars))
    storage = _CACHE.get(key)
    if storage is None:
        with _CACHE_LOCK:
            storage = _CACHE.get(key)
            if storage is None:
                storage = backend.from_url(url)
                _CACHE[key] = storage
    return storage


def env_fingerprint(names: tuple[str, ...]) -> str:
    """A digest of the current values of `names`, so that no credential is kept in a cache key in clear."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(f"{name}={os.environ.get(name)}\0".encode())
    return digest.hexdigest()


def _after_fork_in_child() -> None:
    global _CACHE_LOCK
    _CACHE_LOCK = threading.Lock()
    _CACHE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def clear_storage_cache() -> None:
    """Forget every cached backend (for tests, or after changing credentials in-process)."""
    with _CACHE_LOCK:
        _CACHE.clear()


# The built-in backends; each module imports its SDK only when a client is first built.
for _scheme, _target, _extra in (
    ("", "streaming.storage.local:LocalStorage", None),
    ("file", "streaming.storage.local:LocalStorage", None),
    ("s3", "streaming.storage.s3:S3Storage", "s3"),
    ("gs", "streaming.storage.gcs:GCSStorage", "gcs"),
    ("azure", "streaming.storage.azure:AzureStorage", "azure"),
    ("azure-dl", "streaming.storage.azure:AzureStorage", "azure"),
    ("abfs", "streaming.storage.azure:AzureStorage", "azure"),
    ("abfss", "streaming.storage.azure:AzureStorage", "azure"),
    ("oci", "streaming.storage.oci:OCIStorage", "oci"),
    ("dbfs", "streaming.storage.databricks:DBFSStorage", "databricks"),
    ("hf", "streaming.storage.hf:HFStorage", "hf"),
    ("sftp", "streaming.storage.sftp:SFTPStorage", "sftp"),
):
    register_backend(_scheme, _target, extra=_extra)
