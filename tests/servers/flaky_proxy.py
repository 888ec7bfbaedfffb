"""A loopback TCP proxy that can drop connections on demand, to give clients real transient failures.

Stdlib only; runs in threads of the test process. `fail_next(n)` makes the next `n` accepted
connections close at once with a TCP reset (and cuts the connections already open), so the client sees
a genuine `connection reset` from its HTTP stack; later connections are forwarded to the target port.

`chaos(rate, seed)` faults a share of HTTP requests instead: each request the client sends (a chunk that
starts with an HTTP method) is, with probability ``rate``, either reset before it reaches the server,
answered with a body cut short (the response is forwarded up to a random byte, then the connection is
reset) or delayed. `faults` counts them by kind, `requests` counts every request seen. `refuse(path_part)` resets every
request for one object instead, to fail a chosen step of a write.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass

_METHODS = (b"GET ", b"PUT ", b"POST ", b"HEAD ", b"DELETE ", b"PATCH ")
FAULT_KINDS = ("reset", "truncate", "latency")


@dataclass
class _Pair:
    """One forwarded connection: how many more response bytes may pass before it is cut (None: no limit)."""

    client: socket.socket
    upstream: socket.socket
    cut_after: int | None = None


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
        self.rate = 0.0
        self.requests = 0
        self.faults: Counter[str] = Counter()
        self._random = random.Random(0)
        self.refused: str | None = None
        threading.Thread(target=self._accept_loop, name="flaky-proxy", daemon=True).start()

    def fail_next(self, count: int) -> None:
        """Reset the next `count` connections and cut every connection currently open."""
        with self._lock:
            self._due = count
            doomed = list(self._open)
            self._open.clear()
        for sock in doomed:
            _reset(sock)

    def chaos(self, rate: float, seed: int = 0) -> None:
        """From now on fault each request with probability ``rate`` (0 stops), reproducibly for ``seed``."""
        with self._lock:
            self.rate = rate
            self._random = random.Random(seed)

    def refuse(self, path_part: str | None) -> None:
        """Reset every request that names ``path_part`` (None stops), e.g. one object's key, in its first bytes."""
        self.refused = path_part

    def _roll(self, request: bytes) -> str | None:
        refused = self.refused
        spellings = () if refused is None else (refused, urllib.parse.quote(refused, safe=""))
        # OCI sends the key URL-encoded in the path, GCS's multipart upload names it in the JSON part of the body
        if any(spelling.encode() in request for spelling in spellings):
            self.faults["refused"] += 1
            return "reset"
        with self._lock:
            self.requests += 1
            if self.rate <= 0 or self._random.random() >= self.rate:
                return None
            kind = self._random.choice(FAULT_KINDS)
            self.faults[kind] += 1
            return kind

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
            pair = _Pair(client, upstream)
            threading.Thread(target=self._pump, args=(client, upstream, pair, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pair, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, pair: _Pair, request: bool) -> None:
        try:
            while chunk := source.recv(1 << 16):
                if request and chunk.startswith(_METHODS):
                    kind = self._roll(chunk)
                    if kind == "reset":
                        _reset(pair.client)
                        _reset(pair.upstream)
                        return
                    if kind == "latency":
                        time.sleep(self._random.uniform(0.05, 0.3))
                    if kind == "truncate":
                        pair.cut_after = self._random.randint(1, 4096)
                if not request and pair.cut_after is not None:
                    if len(chunk) >= pair.cut_after:
                        sink.sendall(chunk[: pair.cut_after])
                        _reset(pair.client)
                        _reset(pair.upstream)
                        return
                    pair.cut_after -= len(chunk)
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
