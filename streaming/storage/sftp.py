"""`sftp://[user[:password]@]host[:port]/absolute/path` through paramiko, as upstream's SFTP downloader.

The URL's path is the absolute path on the server (upstream's meaning). Authentication: the private key file named
by `COMPOSER_SFTP_KEY_FILE`, a password in the URL (percent-encoded), or paramiko's defaults (the SSH agent and
`~/.ssh/id_*`). The server's host key must be known: `~/.ssh/known_hosts` and the file named by
`COMPOSER_SFTP_KNOWN_HOSTS_FILE` are loaded, and an unknown host is refused (no trust on first use).

Uploads write a temporary name in the target directory and rename it into place (`posix-rename@openssh.com`),
so a reader never sees a partial object. paramiko's SFTP sessions are not shared across threads: each thread
opens its own connection, and a forked process (a DataLoader worker) never touches its parent's.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import posixpath
import stat
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import unquote, urlsplit

from streaming._extras import require
from streaming.storage.base import CHUNK_SIZE, DEFAULT_TIMEOUT, Storage
from streaming.storage.errors import (
    CredentialsError,
    EndpointUnreachableError,
    StorageError,
    StoragePermissionError,
)
from streaming.storage.url import check_decoded_segments, without_password

DEFAULT_PORT = 22
KEY_FILE_VAR = "COMPOSER_SFTP_KEY_FILE"
KNOWN_HOSTS_VAR = "COMPOSER_SFTP_KNOWN_HOSTS_FILE"


@dataclass(frozen=True)
class SFTPServer:
    """Where an `sftp://` URL's server is and whom to log in as (the password never appears in `repr`)."""

    host: str
    port: int
    username: str | None
    password: str | None

    def __repr__(self) -> str:
        return f"SFTPServer({self.username}@{self.host}:{self.port})"


def parse_sftp_url(url: str) -> tuple[SFTPServer, str]:
    """The server and the absolute remote path of `url`; ValueError (upstream's words) for a bad URL."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError("If specifying a URI, the URI must include the hostname.")
    if parts.query or parts.fragment:
        raise ValueError("Query and fragment parameters are not supported as part of a URI.")
    server = SFTPServer(
        parts.hostname,
        parts.port or DEFAULT_PORT,
        unquote(parts.username) if parts.username else None,
        unquote(parts.password) if parts.password is not None else None,
    )
    return server, unquote(parts.path) or "/"


class _Session:
    """One SSH connection and its SFTP channel."""

    def __init__(self, server: SFTPServer, timeout: float) -> None:
        paramiko = require("paramiko", "sftp", "SFTP storage")
        key_file = os.environ.get(KEY_FILE_VAR) or None
        if key_file is not None and not os.path.isfile(key_file):
            raise _MissingKeyFile(key_file)
        self.ssh = paramiko.SSHClient()
        self.ssh.load_system_host_keys()
        known_hosts = os.environ.get(KNOWN_HOSTS_VAR) or None
        if known_hosts is not None:
            self.ssh.load_system_host_keys(known_hosts)
        try:
            self.ssh.connect(
                hostname=server.host,
                port=server.port,
                username=server.username,
                password=server.password,
                key_filename=key_file,
                timeout=min(timeout, 10.0),
                banner_timeout=min(timeout, 10.0),
                auth_timeout=min(timeout, 10.0),
            )
            self.sftp = self.ssh.open_sftp()
        except BaseException:
            self.ssh.close()
            raise
        self.sftp.get_channel().settimeout(timeout)

    def alive(self) -> bool:
        transport = self.ssh.get_transport()
        return transport is not None and transport.is_active()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ssh.close()


class _MissingKeyFile(Exception):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class SFTPStorage(Storage):
    """One SFTP server (and login); one connection per (process, thread)."""

    env_vars = (KEY_FILE_VAR, KNOWN_HOSTS_VAR)

    def __init__(self, server: SFTPServer) -> None:
        self.server = server
        self._sessions: dict[int, _Session] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @classmethod
    def from_url(cls, url: str) -> SFTPStorage:
        return cls(parse_sftp_url(url)[0])

    @staticmethod
    def cache_key(url: str) -> str:
        # The netloc may hold a password: key the cache by a digest of it, never by the text.
        return hashlib.sha256(urlsplit(url).netloc.encode()).hexdigest()

    def _session(self, timeout: float = DEFAULT_TIMEOUT) -> _Session:
        if os.getpid() != self._pid:  # forked: the parent's connections are not ours to use, nor to close
            self._lock = threading.Lock()
            self._sessions = {}
            self._pid = os.getpid()
        thread = threading.get_ident()
        session = self._sessions.get(thread)
        if session is not None and not session.alive():  # dropped by the server or the network: reconnect
            session.close()
            session = None
        if session is None:
            session = _Session(self.server, timeout)
            with self._lock:
                self._sessions[thread] = session
        return session

    def __getstate__(self) -> dict[str, Any]:  # connections stay with their process
        return {"server": self.server}

    def __setstate__(self, state: dict[str, Any]) -> None:
        SFTPStorage.__init__(self, state["server"])

    def reset(self) -> None:
        with self._lock:
            sessions, self._sessions = self._sessions, {}
        if os.getpid() == self._pid:
            for session in sessions.values():
                session.close()

    def _path(self, url: str) -> str:
        server, path = parse_sftp_url(url)
        if server != self.server:
            raise ValueError(f"{without_password(url)} is not on the SFTP server of this backend ({self.server!r})")
        # The URL's text was checked before it got here; its percent-decoded form is what the server resolves.
        return check_decoded_segments(path, url)

    # -- operations -----------------------------------------------------------------------------
    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        path = self._path(url)
        sftp = self._session(timeout).sftp
        sftp.get_channel().settimeout(timeout)
        attributes = sftp.stat(path)
        if stat.S_ISDIR(attributes.st_mode or 0):
            raise FileNotFoundError(errno.ENOENT, "is a directory", path)
        with sftp.open(path, "rb") as source:
            source.prefetch(attributes.st_size)
            while chunk := source.read(CHUNK_SIZE):
                sink.write(chunk)
        return attributes.st_size

    def _upload(self, local_path: str, url: str) -> None:
        path = self._path(url)
        sftp = self._session().sftp
        directory, name = posixpath.split(path)
        self._make_dirs(sftp, directory)
        temp_path = posixpath.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.part")
        try:
            sftp.put(local_path, temp_path, confirm=True)
            try:
                sftp.posix_rename(temp_path, path)
            except OSError as exc:  # a server without the posix-rename extension: replace in two steps
                if isinstance(exc, (FileNotFoundError, PermissionError)):
                    raise
                with contextlib.suppress(FileNotFoundError):
                    sftp.remove(path)
                sftp.rename(temp_path, path)
        except BaseException:
            with contextlib.suppress(Exception):
                sftp.remove(temp_path)
            raise

    @staticmethod
    def _make_dirs(sftp: Any, directory: str) -> None:
        missing: list[str] = []
        while directory not in ("", "/"):
            try:
                if stat.S_ISDIR(sftp.stat(directory).st_mode or 0):
                    break
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", directory)
            except FileNotFoundError:
                missing.append(directory)
                directory = posixpath.dirname(directory)
        for folder in reversed(missing):
            try:
                sftp.mkdir(folder)
            except OSError:
                if not stat.S_ISDIR(sftp.stat(folder).st_mode or 0):  # made meanwhile by another writer is fine
                    raise

    def _list(self, prefix_url: str) -> Iterator[str]:
        root = self._path(prefix_url).rstrip("/") or "/"
        base = prefix_url.rstrip("/")
        sftp = self._session().sftp
        pending = [""]
        while pending:
            relative = pending.pop()
            try:
                entries = sftp.listdir_attr(posixpath.join(root, relative) if relative else root)
            except FileNotFoundError:
                continue
            for entry in entries:
                child = posixpath.join(relative, entry.filename) if relative else entry.filename
                if stat.S_ISDIR(entry.st_mode or 0):
                    pending.append(child)
                else:
                    yield f"{base}/{child}"

    def _size(self, url: str) -> int | None:
        try:
            attributes = self._session().sftp.stat(self._path(url))
        except FileNotFoundError:
            return None
        return None if stat.S_ISDIR(attributes.st_mode or 0) else int(attributes.st_size or 0)

    def _modified(self, url: str) -> float | None:
        try:
            attributes = self._session().sftp.stat(self._path(url))
        except FileNotFoundError:
            return None
        return None if stat.S_ISDIR(attributes.st_mode or 0) else float(attributes.st_mtime or 0)

    def _delete(self, url: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._session().sftp.remove(self._path(url))

    # -- errors ---------------------------------------------------------------------------------
    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        import paramiko

        server = f"{self.server.host}:{self.server.port}"
        login = f"user {self.server.username!r}" if self.server.username else "the local user name"
        if isinstance(exc, _MissingKeyFile):
            return CredentialsError(url, f"{KEY_FILE_VAR} names {exc.path!r}, which does not exist")
        if isinstance(exc, paramiko.BadHostKeyException) or (
            isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc)
        ):
            return CredentialsError(
                url,
                f"the host key of {server} is unknown or has changed; add the server's key to {KNOWN_HOSTS_VAR} "
                f"(or ~/.ssh/known_hosts), e.g. `ssh-keyscan -p {self.server.port} {self.server.host} >> FILE`",
            )
        if isinstance(exc, paramiko.AuthenticationException) or (
            isinstance(exc, paramiko.SSHException) and "No authentication methods available" in str(exc)
        ):
            return CredentialsError(
                url,
                f"{server} rejected the credentials of {login} ({type(exc).__name__}); check {KEY_FILE_VAR} "
                "(a private key whose public key the server authorizes) or the password in the URL",
            )
        if isinstance(exc, FileNotFoundError):
            return self._not_found(url)
        if isinstance(exc, PermissionError):
            return StoragePermissionError(url, f"permission denied on {server} for {login}; check the path's mode")
        if isinstance(exc, (paramiko.SSHException, EOFError, OSError)):
            return EndpointUnreachableError(
                url,
                f"cannot reach or talk to the SFTP server {server} ({type(exc).__name__}); "
                "check the host, the port and the network",
            )
        return None
