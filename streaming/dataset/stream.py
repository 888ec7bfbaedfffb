"""`Stream`: one dataset directory (remote and/or local), its settings and its mixing weight.

A stream says where its shards are and how to download them (retries, timeout, hash, keep_zip); its
`ShardCache` decides when a shard is fetched and `ShardFetcher` fetches it. Settings a stream leaves unset come
from its dataset (`StreamDefaults`, given through upstream's ``apply_default``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from streaming.dataset.shard_fetcher import ShardFetcher
from streaming.dataset.shared_table import load_table
from streaming.dataset.weighting import StreamWeight, resolve_weights, validate_weights
from streaming.format.index import get_index_basename
from streaming.format.reader import Reader
from streaming.format.table import ShardTable
from streaming.storage.url import without_password

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from streaming.dataset.world import World
    from streaming.storage.base import Storage


@dataclass(frozen=True)
class StreamDefaults:
    """The settings a dataset gives each of its streams that leaves them unset (``None``).

    Upstream passes them to ``Stream.apply_default`` as a dict with these keys (`as_dict`), which is what a
    stream subclass overriding that hook receives.
    """

    remote: str | None = None
    local: str | None = None
    split: str | None = None
    download_retry: int = 2
    download_timeout: float = 60.0
    validate_hash: str | None = None
    keep_zip: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_local_dir(remote: str | None) -> str:
    """The cache location of a stream without ``local``: ``<tmp>/streaming-cache-<uid>/<blake2s(remote)>``.

    Upstream uses ``<tmp>/<blake2s(remote)>``, which any local user can pre-create and fill with their own
    samples; here the parent is private to the user (0700, owner checked) and the cache folder inside it is
    made 0700 too, so nothing in it comes from anyone else. If another user created the parent first, the
    next private place is used (``~/.cache/mds-streaming/cache``; `first_private_dir`). An existing cache
    folder is reused (its shards are a cache of the same remote). When another user took both (and the home
    cannot be written), a fresh private folder of an unguessable name is made under ``<tmp>`` instead, once per
    process and remote (`_fresh_cache_dir`): nothing is reused across runs then, but nothing of theirs is read.
    """
    from streaming.dataset.coordination.root import first_private_dir, make_private_dir, user_cache_home

    digest = hashlib.blake2s((remote or "").encode("utf-8"), digest_size=16).hexdigest()
    candidates = [
        os.path.join(tempfile.gettempdir(), f"streaming-cache-{os.getuid()}"),
        os.path.join(user_cache_home(), "mds-streaming", "cache"),
    ]
    try:
        parent = first_private_dir(candidates, "Default cache directory")
    except PermissionError as err:
        return _fresh_cache_dir(digest, str(err))
    path = os.path.join(parent, digest)
    make_private_dir(path, "Default cache directory", "pass local=")
    return path


@functools.cache
def _fresh_cache_dir(digest: str, why: str) -> str:
    """A new private cache folder for the remote of ``digest``, made by ``mkdtemp`` (0700, a random name no one
    can have created first); the same one for the rest of this process."""
    path = tempfile.mkdtemp(prefix=f"streaming-cache-{os.getuid()}-{digest[:8]}-")
    logger.warning("%s Using the new private folder %s as this process's cache (pass local= to choose one).", why, path)
    return path


def check_cache_dir(path: str) -> None:
    """Refuse an explicit ``local`` cache folder that another user owns or may write to (not world-writable).

    Shards found in a cache are read without being fetched again, so a folder another user created first, or
    can add files to, would have their samples served (and, with ``allow_unsafe_types``, their pickles run as
    you): the check the default cache gets. A missing folder is created private (0700).
    """
    from streaming.dataset.coordination.root import trusted_folder

    try:
        os.makedirs(path, mode=0o700)  # made now: this user's own
        return
    except FileExistsError:
        pass
    except OSError as err:
        # Same type, but naming the argument and the way out rather than only the failing parent folder.
        raise type(err)(
            f"Cache directory {path} (local=) cannot be created: {err.strerror} ({err.filename}). Pass local= a "
            f"folder you can create, or leave it out for a private temporary one."
        ) from err
    if trusted_folder(path):
        return
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(f"Cache directory {path} (local=) is not a folder.")
    reason = (
        f"belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
        if info.st_uid != os.getuid()
        else f"is writable by every user (mode {stat.S_IMODE(info.st_mode):o})"
    )
    raise PermissionError(
        f"Cache directory {path} (local=) {reason}: shards found there are used as they are, so anyone who "
        f"can write there could make you read their samples. Pass a local= folder of your own that other users "
        f"cannot write to (or leave local unset for a private default)."
    )


def _check_split(split: str) -> str:
    """Refuse a split that is not a plain relative folder (it would leave both remote and local)."""
    parts = split.replace("\\", "/").strip("/").split("/")
    if split.startswith(("/", "\\")) or any(part in (".", "..") for part in parts) or "\x00" in split:
        raise ValueError(f"split {split!r} must be a relative folder inside the dataset, without '.' or '..'.")
    return split


def _is_remote_path(path: str | None) -> bool:
    from streaming.storage.url import is_remote

    return is_remote(path)


class Stream:
    """A dataset directory with its mixing weight.

    Args:
        remote: where the shards live (any supported URL or a local path); ``None`` when they are only local.
        local: local cache directory; ``None`` picks a temp directory derived from ``remote``.
        split: sub-directory of the split.
        proportion: relative weight of this stream in an epoch.
        repeat: absolute weight: how many times each sample is seen per epoch (may be fractional).
        choose: absolute weight: how many samples are drawn per epoch.
        download_retry: total download attempts per file (inherits the dataset's when ``None``).
        download_timeout: seconds per download request (inherits when ``None``).
        validate_hash: hash algorithm to verify downloads with (inherits when ``None``).
        keep_zip: keep compressed files after decompressing (inherits when ``None``).
    """

    def __init__(
        self,
        *,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        proportion: float | None = None,
        repeat: float | None = None,
        choose: int | None = None,
        download_retry: int | None = None,
        download_timeout: float | None = None,
        validate_hash: str | None = None,
        keep_zip: bool | None = None,
    ) -> None:
        self._weight = StreamWeight(proportion, repeat, choose)
        if download_retry is not None and download_retry < 0:
            raise ValueError(f"`download_retry` must be non-negative, got {download_retry}.")
        if download_timeout is not None and download_timeout <= 0:
            raise ValueError(f"`download_timeout` must be positive, got {download_timeout}.")
        self.remote = remote
        self._local = local
        self.split = _check_split(split or "")
        self.proportion: float | None = proportion
        self.repeat: float | None = repeat
        self.choose: int | None = choose
        self.download_retry = download_retry
        self.download_timeout = download_timeout
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip

    @property
    def weight(self) -> StreamWeight:
        """The weight as given by the user (before resolution against the stream sizes)."""
        return self._weight

    @property
    def local(self) -> str:
        if self._local is None:
            self._local = default_local_dir(self.remote)
        return self._local

    @local.setter
    def local(self, value: str | None) -> None:
        self._local = value

    @property
    def safe_keep_zip(self) -> bool:
        """Whether compressed files must stay: asked for, or they are the only copy (no distinct remote)."""
        return bool(self.keep_zip) or self.remote is None or self.remote == self._local

    @property
    def has_remote(self) -> bool:
        """Whether shards can be fetched again after eviction."""
        return self.remote is not None and os.path.abspath(str(self.remote)) != os.path.abspath(self.local)

    def apply_default(self, default: Mapping[str, Any]) -> None:
        """Fill every setting left at ``None`` from the dataset's defaults (`StreamDefaults.as_dict`)."""
        defaults = StreamDefaults(
            **{name: default[name] for name in StreamDefaults.__dataclass_fields__ if name in default}
        )
        if self.remote is None:
            self.remote = defaults.remote
        if self._local is None:
            self._local = defaults.local
        if not self.split and defaults.split:
            self.split = _check_split(defaults.split)
        if self.download_retry is None:
            self.download_retry = defaults.download_retry
        if self.download_timeout is None:
            self.download_timeout = defaults.download_timeout
        if self.validate_hash is None:
            self.validate_hash = defaults.validate_hash
        if self.keep_zip is None:
            self.keep_zip = defaults.keep_zip

    def local_path(self, basename: str) -> str:
        return os.path.join(self.local, self.split, basename)

    def remote_path(self, basename: str) -> str:
        from streaming.storage.url import join_url

        if self.remote is None:
            raise ValueError(f"Stream {self.local!r} has no remote to read {basename} from.")
        if _is_remote_path(self.remote):
            return join_url(self.remote, *([self.split] if self.split else []), basename)
        return os.path.join(self.remote, self.split, basename)

    def remote_index_location(self) -> str | None:
        """Where this stream's index lives remotely, one spelling per place (local paths made absolute).

        None without a remote. Names which dataset a local cache directory holds the shards of.
        """
        if self.remote is None:
            return None
        from streaming.storage.url import split_url

        location = self.remote_path(get_index_basename())
        # A local remote may be spelled as a path or a file:// URL: both name the same place.
        return location if _is_remote_path(location) else os.path.abspath(split_url(location).key)

    def get_index_size(self) -> int:
        return os.stat(self.local_path(get_index_basename())).st_size

    def remote_storage(self) -> Storage | None:
        """The backend to download from: for a local remote, one that follows no link below the remote's folder
        (`LocalStorage.below`); None to let the URL pick it."""
        from streaming.storage.local import LocalStorage, local_path
        from streaming.storage.registry import storage_for

        if self.remote is None or _is_remote_path(self.remote):
            return None
        if not isinstance(storage_for(self.remote), LocalStorage):  # a /Volumes path served by the Files API
            return None
        return LocalStorage.below(local_path(self.remote))

    def load_table(self) -> ShardTable:
        """Read this stream's index, downloading it first when it is not in the local directory yet.

        A local ``index.json`` is used as is (no freshness check against the remote, as upstream). An explicit
        ``local`` that caches a remote must be the user's own folder (`check_cache_dir`). A large index is decoded
        once per node and mapped by the node's other processes (`streaming.dataset.shared_table`).
        """
        if self._local is not None and self.has_remote:
            check_cache_dir(self._local)
        path = self.local_path(get_index_basename())
        if not os.path.exists(path):
            if self.remote is None:
                raise RuntimeError(f"No `remote` provided, but local file {path} does not exist either.")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            ShardFetcher(self).download(get_index_basename())
        return load_table(path, self.local)

    def prepare_shard(self, shard: Reader) -> int:
        """Make a shard's raw files present (download, verify, decompress); return the change in bytes on disk.

        Upstream's hook, kept for subclasses and callers: `ShardCache` calls it only when a subclass overrides it
        (and otherwise fetches through `ShardFetcher`, as this does).
        """
        return ShardFetcher(self).fetch(shard)

    @staticmethod
    def validate_weights(streams: Sequence[Stream]) -> tuple[bool, bool]:
        """Return whether the streams are weighted relatively (``proportion``) and whether no weight is set.

        Raises:
            ValueError: relative and absolute weights are mixed.
        """
        return validate_weights([stream.weight for stream in streams])

    @staticmethod
    def apply_weights(
        streams: Sequence[Stream], samples_per_stream: NDArray[np.int64], choose_per_epoch: int | None, seed: int
    ) -> int:
        """Derive every stream's proportion, repeat and choose for an epoch, store them on the streams (as
        upstream does), and return the samples per epoch."""
        resolved = resolve_weights([stream.weight for stream in streams], samples_per_stream, choose_per_epoch, seed)
        for stream_id, stream in enumerate(streams):
            stream.proportion = float(resolved.proportion[stream_id])
            stream.repeat = float(resolved.repeat[stream_id])
            stream.choose = int(resolved.choose[stream_id])
        return resolved.epoch_size

    def get_shards(self, world: World, allow_unsafe_types: bool) -> list[Reader]:
        """Load this stream's index (downloading it if needed) and return a checked reader per shard.

        Raises:
            ValueError: a shard uses an unsafe encoding and ``allow_unsafe_types`` is false.
        """
        table = self.load_table()
        shards = [table.reader(self.local, self.split, shard_id) for shard_id in range(len(table))]
        for shard_id, shard in enumerate(shards):
            shard.validate(allow_unsafe_types)
            # Kept only on this hook's readers: a subclass's override returns a selection of them, from which
            # StreamingDataset rebuilds its shard table (`_shard_table`).
            shard.index_entry = table.entry(shard_id)
        return shards

    def set_up_local(self, shards: list[Reader], cache_usage_per_shard: NDArray[np.int64]) -> None:
        """Make the local directory consistent with ``shards`` and store each shard's bytes on disk."""
        listing: set[str] = set()
        for dirname, _, files in os.walk(os.path.join(self.local, self.split)):
            listing.update(os.path.join(dirname, name) for name in files)
        for shard_id, shard in enumerate(shards):
            cache_usage_per_shard[shard_id] = shard.set_up_local(listing, self.safe_keep_zip)

    def __repr__(self) -> str:
        remote = without_password(self.remote) if self.remote else self.remote  # an sftp:// URL may hold one
        return f"Stream(remote={remote!r}, local={self._local!r}, split={self.split!r})"
