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
    """Stands for an exception whose text, or whose own causes' text, held a credential: its type and its
    cleaned text, chained to the cleaned copies of its causes."""


def scrubbed_cause(exc: BaseException) -> BaseException:
    """``exc`` itself when no exception of its chain (``__cause__``, ``__context__``, notes) quotes a credential,
    else a `ScrubbedCause` copy of the whole chain with each text `scrub`-bed (type names kept).

    Tracebacks print the whole chain, so a chained SDK error quoting a token, a key or a credential file would
    carry the secret into every log; the copy keeps what went wrong without it.
    """
    if not any(_text(link) != scrub(_text(link)) for link in _chain(exc)):
        return exc
    return _copy(exc, set())


def scrubbed_chain(error: BaseException) -> BaseException:
    """``error`` (this package's own, its message already clean) with its cause and context replaced by
    `scrubbed_cause` copies where they hold a credential: what to raise or log."""
    if error.__cause__ is not None:
        error.__cause__ = scrubbed_cause(error.__cause__)
    if error.__context__ is not None and error.__context__ is not error.__cause__:
        error.__context__ = scrubbed_cause(error.__context__)
    elif error.__cause__ is not None:
        error.__context__ = None  # the implicit context was the cause itself: only its clean copy is kept
    return error


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it was raised from or while handling, each once."""
    found: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        link = pending.pop()
        if link is None or any(link is seen for seen in found):
            continue
        found.append(link)
        pending.extend((link.__cause__, link.__context__))
    return found


def _text(exc: BaseException) -> str:
    """What a traceback prints of ``exc`` itself: its text and its notes."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ prints as such; nothing of it can leak
        text = ""
    return "\n".join([text, *map(str, getattr(exc, "__notes__", ()))])


def _copy(exc: BaseException, seen: set[int]) -> BaseException:
    """A `ScrubbedCause` standing for ``exc``, chained to copies of its cause and context."""
    seen.add(id(exc))
    copy = ScrubbedCause(f"{type(exc).__module__}.{type(exc).__qualname__}: {scrub(_text(exc))}")
    if exc.__cause__ is not None and id(exc.__cause__) not in seen:
        copy.__cause__ = _copy(exc.__cause__, seen)
    if exc.__context__ is not None and exc.__context__ is not exc.__cause__ and id(exc.__context__) not in seen:
        copy.__context__ = _copy(exc.__context__, seen)
    copy.__suppress_context__ = exc.__suppress_context__
    return copy


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
