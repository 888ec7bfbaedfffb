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
    if scheme in LOCAL_SCHEMES:
        return Location(scheme, parts.netloc, parts.path if scheme == "file" else url)
    if scheme == "dbfs":
        return Location(scheme, "", "/" + url.split(":", 1)[1].lstrip("/"))
    return Location(scheme, parts.netloc, parts.path.lstrip("/"))


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
