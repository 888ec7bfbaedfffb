"""A loopback TCP proxy that can drop connections on demand, to give clients real transient failures.

Stdlib only; runs in threads of the test process. `fail_next(n)` makes the next `n` accepted
connections close at once with a TCP reset (and cuts the connections already open), so the client sees
a genuine `connection reset` from its HTTP stack; later connections are forwarded to the target port.
"""

from __future__ import annotations

import socket
import struct
import threading


class FlakyProxy:
    """Forward 127.0.0.1:`port` to 127.0.0.1:`target_port`, resetting connections while failures are due."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.failures = 0
        self.forwarded = 0
        self._due = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, name="flaky-proxy", daemon=True).start()

    def fail_next(self, count: int) -> None:
        """Reset the next `count` connections and cut every connection currently open."""
        with self._lock:
            self._due = count
            doomed = list(self._open)
            self._open.clear()
        for sock in doomed:
            _reset(sock)

    def close(self) -> None:
        """Stop accepting and cut all open connections."""
        self._closed = True
        self.fail_next(0)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                fail = self._due > 0
                if fail:
                    self._due -= 1
                    self.failures += 1
                else:
                    self.forwarded += 1
            if fail:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(1 << 16):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with self._lock:
                    self._open.discard(sock)
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


def _reset(sock: socket.socket) -> None:
    """Close `sock` with an RST instead of an orderly FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass
