"""Storage errors that say what went wrong and what to check, without ever quoting a credential.

Each class also derives from the matching builtin, so callers may catch `FileNotFoundError`,
`PermissionError` or `ConnectionError` as they would for local files.
"""

from __future__ import annotations

from streaming.storage.secrets import scrub
from streaming.storage.url import without_password


class StorageError(OSError):
    """Base class of every error raised by a storage backend; `url` is the object or prefix concerned."""

    def __init__(self, url: str, message: str) -> None:
        url = scrub(without_password(url))  # neither a URL's password nor a presigned URL's signature goes further
        super().__init__(f"{url}: {scrub(message)}")
        self.url = url


class ScrubbedCause(Exception):
    """Stands for a client library's exception whose text held a credential: its type and its cleaned text."""


def scrubbed_cause(exc: BaseException) -> BaseException:
    """``exc`` itself when its text holds no URL password, else a `ScrubbedCause` with the password removed.

    Tracebacks print the whole cause chain, so a chained SDK error quoting ``http://KEY:SECRET@host`` would
    carry the secret into every log; the replacement keeps what went wrong without it.
    """
    text = str(exc)
    cleaned = scrub(text)
    if cleaned == text:
        return exc
    return ScrubbedCause(f"{type(exc).__module__}.{type(exc).__qualname__}: {cleaned}")


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object (or its bucket/container/volume) does not exist."""


class StoragePermissionError(StorageError, PermissionError):
    """The credentials were accepted but lack permission for this object."""


class CredentialsError(StoragePermissionError):
    """No usable credentials were found, or the server rejected them."""


class EndpointUnreachableError(StorageError, ConnectionError):
    """The storage endpoint could not be reached, or the connection broke or timed out."""


class RequestRejectedError(StorageError, ValueError):
    """The service refused the request itself (a bad path, a conflict): retrying it cannot help."""


class IncompleteTransferError(StorageError):
    """A transfer ended with fewer or more bytes than the object holds."""


class UnsupportedOperationError(StorageError):
    """The store cannot do what was asked (e.g. a create-only write)."""


class DownloadTooLargeError(StorageError, ValueError):
    """An object that grew past the size the caller expected while downloading (stopped there, not retried)."""
