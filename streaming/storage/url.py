"""Parse and join storage URLs and local paths, keeping each scheme's spelling (`dbfs:/x`, `s3://b/k`)."""

from __future__ import annotations

import os
import posixpath
import re
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
    key = location.key.rstrip("/").lstrip("/")  # a trailing "/" names a prefix; dbfs and paths start with "/"
    segments = key.split("/") if key else []
    if any(segment in ("", ".", "..") for segment in segments):
        raise ValueError(
            f"Storage URL {without_password(url)!r} has an empty, '.' or '..' path segment: refusing it, since "
            f"such a path may leave its bucket, container or volume."
        )


def without_password(url: str) -> str:
    """`url` with the password of its user info (`scheme://user:password@host`) replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL (e.g. an unbalanced "[" in a local path): nothing to hide
        return url
    if parts.password is None:
        return url
    return parts._replace(netloc=f"{parts.username}:***@{parts.netloc.rpartition('@')[2]}").geturl()


#: The password of a URL's user info anywhere in a text: ``scheme://user:password@``.
_USERINFO_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*):[^\s/@]*@")


def scrub(text: str) -> str:
    """``text`` with the password of every URL in it (``scheme://user:password@host``) replaced by ``***``."""
    return _USERINFO_PASSWORD.sub(r"\1:***@", text)


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
