"""A real SSH/SFTP server on loopback for the sftp:// tests, built on asyncssh (pure pip, no root, no apt).

Run: `python sftp_server.py PORT ROOT HOST_KEY AUTHORIZED_KEYS USER PASSWORD`.

It speaks the SSH 2 protocol and SFTP version 3 with the OpenSSH extensions (posix-rename, statvfs, ...)
through asyncssh's own implementation, serving ROOT as `/` (chroot). Only USER may log in, with the public
keys of AUTHORIZED_KEYS or with PASSWORD; everyone and everything else is refused, as sshd would.
"""

from __future__ import annotations

import asyncio
import os
import sys

import asyncssh


def main() -> None:
    port, root, host_key, authorized_keys, user, password = sys.argv[1:7]

    class Server(asyncssh.SSHServer):
        def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
            self._conn = conn

        def begin_auth(self, username: str) -> bool:
            if username == user:
                self._conn.set_authorized_keys(authorized_keys)
            return True  # authentication is always required

        def password_auth_supported(self) -> bool:
            return True

        def validate_password(self, username: str, given: str) -> bool:
            return username == user and given == password

    async def serve() -> None:
        await asyncssh.listen(
            "127.0.0.1",
            int(port),
            server_host_keys=[host_key],
            server_factory=Server,
            sftp_factory=lambda channel: asyncssh.SFTPServer(channel, chroot=os.fsencode(root)),
            allow_scp=False,
        )
        sys.stderr.write(f"sftp server listening on 127.0.0.1:{port}\n")
        sys.stderr.flush()
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
