"""A loopback TCP proxy whose downloads share one fixed bandwidth: one node's network link, for `simulate`.

Bytes from the server to the clients pass a token bucket shared by every connection, so parallel downloads
split the rate as they do on a real link. Stdlib only; runs in daemon threads of the test process.
"""

from __future__ import annotations

import socket
import threading
import time

CHUNK = 16 << 10


class ThrottleProxy:
    """Forward 127.0.0.1:`port` to 127.0.0.1:`target_port`, server-to-client at `rate` bytes per second in all."""

    def __init__(self, target_port: int, rate: float) -> None:
        self.target_port = target_port
        self.rate = rate
        self.downloaded = 0
        self._lock = threading.Lock()
        self._next_free = time.monotonic()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, name="throttle-proxy", daemon=True).start()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()

    def _wait_for(self, size: int) -> None:
        """Reserve `size` bytes of the link; sleep until the link has carried them."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_free)
            self._next_free = start + size / self.rate
            self.downloaded += size
            wake = self._next_free
        time.sleep(max(0.0, wake - time.monotonic()))

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, throttled: bool) -> None:
        try:
            while chunk := source.recv(CHUNK):
                if throttled:
                    self._wait_for(len(chunk))
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
