"""Parse and join storage URLs and local paths, keeping each scheme's spelling (`dbfs:/x`, `s3://b/k`)."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from urllib.parse import urlsplit

LOCAL_SCHEMES = ("", "file")


@dataclass(frozen=True)
class Location:
    """A URL split into scheme, netloc (bucket, container, ...) and key (no leading slash)."""

    scheme: str
    netloc: str
    key: str


def split_url(url: str) -> Location:
    """Split `url`; a plain path has scheme `""` and keeps its leading slash in `key`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        return Location("", "", url)
    if scheme == "file" and parts.netloc not in ("", "localhost"):
        raise ValueError(
            f"Unsupported file URL {url!r}: it names host {parts.netloc!r}, but file:// URLs here can only name "
            f"local paths (file:///path)."
        )
    if scheme in LOCAL_SCHEMES:
        return Location(scheme, parts.netloc, parts.path if scheme == "file" else url)
    if scheme == "dbfs":
        return Location(scheme, "", "/" + url.split(":", 1)[1].lstrip("/"))
    return Location(scheme, parts.netloc, parts.path.lstrip("/"))


def check_segments(url: str) -> None:
    """Refuse an object-store or Databricks URL whose key has ``.``/``..`` or empty segments.

    Servers and SDKs resolve such keys differently (some send them as they are, some turn a ``..`` into
    another bucket, container or volume), so a URL that could leave its prefix is refused up front.
    A trailing ``/`` (a prefix) is fine.

    Raises:
        ValueError: the URL has such a segment.
    """
    location = split_url(url)
    if location.scheme in LOCAL_SCHEMES and not location.key.startswith("/Volumes/"):
        return
    # The key as written: `split_url` drops the slashes that start it, so `s3://bucket//key` would pass as `key`.
    if location.scheme in ("dbfs", *LOCAL_SCHEMES):
        key = location.key.rstrip("/").removeprefix("/")  # a trailing "/" names a prefix; these start with "/"
    else:
        key = urlsplit(url).path.rstrip("/")[1:]
    segments = key.split("/") if key else []
    if any(segment in ("", ".", "..") for segment in segments):
        raise ValueError(
            f"Storage URL {without_password(url)!r} has an empty, '.' or '..' path segment: refusing it, since "
            f"such a path may leave its bucket, container or volume."
        )


class UnsafePathError(ValueError):
    """A path from data or a listing that could leave its root: ``..``, absolute, or through a symlink."""


def check_relative_path(path: object, where: str, what: str = "path") -> str:
    """The one rule for every ``/``-separated path the package builds from data or a listing.

    An index basename, a commit's file list, a merge input's shard, a store's listing, a destination's
    contents: before any of them is joined to a root, it must be a plain relative path inside it: a non-empty
    string, not absolute, without ``.``, ``..`` or empty segments, backslashes, NUL, or a drive letter or
    scheme (a colon) in its first segment. Backends that decode a path further (percent-decoding on
    ``sftp://``) check the decoded form again (`check_decoded_segments`).

    Raises:
        UnsafePathError: ``where`` names where the path came from.
    """
    if type(path) is not str or not path:
        raise UnsafePathError(f"{where}: {what} must be a non-empty string, got {path!r}.")
    segments = path.split("/")
    if "\\" in path or "\x00" in path or ":" in segments[0] or any(segment in ("", ".", "..") for segment in segments):
        raise UnsafePathError(
            f"{where}: {what} {path!r} is not a plain relative path inside the dataset directory; refusing to "
            f"read or write outside it."
        )
    return path


def check_decoded_segments(path: str, url: str) -> str:
    """Refuse an absolute path, as a backend decoded it from ``url``, with ``.``, ``..`` or empty segments.

    Checks on the URL's text run before a backend's own decoding (``%2e%2e`` is ``..`` once percent-decoded),
    so a backend that decodes checks the result again before it is sent. A trailing ``/`` is fine.

    Raises:
        UnsafePathError: such a segment, or a NUL.
    """
    segments = path.rstrip("/").lstrip("/").split("/")
    if "\x00" in path or (path.strip("/") and any(segment in ("", ".", "..") for segment in segments)):
        raise UnsafePathError(
            f"Storage URL {without_password(url)!r} names the path {path!r} once decoded, which has an empty, "
            f"'.' or '..' segment: refusing it, since it may leave its folder."
        )
    return path


def without_password(url: str) -> str:
    """`url` with the password of its user info (`scheme://user:password@host`) replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL (e.g. an unbalanced "[" in a local path): nothing to hide
        return url
    if parts.password is None:
        return url
    return parts._replace(netloc=f"{parts.username}:***@{parts.netloc.rpartition('@')[2]}").geturl()


def scheme_of(url: str) -> str:
    """The lower-case scheme of `url`, or `""` for a local path."""
    return split_url(url).scheme


def is_remote(url: str | None) -> bool:
    """Whether `url` names remote storage (anything but a local path or `file://`)."""
    if not url:
        return False
    return scheme_of(url) not in LOCAL_SCHEMES


def join_url(base: str, *parts: str) -> str:
    """Join relative `parts` (with `/` separators) onto a URL or local path."""
    relative = posixpath.join(*(p.replace(os.sep, "/").strip("/") for p in parts if p))
    if not relative:
        return base
    if not is_remote(base):
        return os.path.join(base, *relative.split("/"))
    return base.rstrip("/") + "/" + relative


def relative_to(url: str, base: str) -> str:
    """The `/`-separated path of `url` below `base` (both in the same spelling)."""
    if not is_remote(base):
        return os.path.relpath(url, base).replace(os.sep, "/")
    prefix = base.rstrip("/") + "/"
    if not url.startswith(prefix):
        raise ValueError(f"{url!r} is not below {base!r}")
    return url[len(prefix) :]
