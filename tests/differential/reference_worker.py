"""The reference worker: a long-lived child process that runs differential operations on MosaicML Streaming.

Started by ``reference.py`` as ``<reference python> -I reference_worker.py``: isolated mode keeps this project
(the test process's ``PYTHONPATH`` and working directory) off ``sys.path``, so ``import streaming`` finds
streaming-community 0.14.2 of that virtualenv; this file's folder is then added for ``import operations``.

Protocol, over stdin/stdout: each message is a 4-byte little-endian length followed by a pickle. The worker
first sends ``{"streaming": streaming.__file__, "version": ...}``; then for each request ``(name, kwargs)`` it
answers ``("ok", result)`` or ``("crash", traceback text)`` when the operation itself failed unexpectedly. It
exits when stdin closes. Anything the reference prints goes to stderr, never into the protocol stream.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import traceback
from typing import Any, BinaryIO

_LENGTH = struct.Struct("<I")


def _receive(stream: BinaryIO) -> Any:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    return pickle.loads(stream.read(_LENGTH.unpack(head)[0]))


def _send(stream: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def main() -> None:
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer

    # -I leaves this file's folder off sys.path too; it holds operations.py (and no `streaming`).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import operations

    import streaming

    _send(replies, {"streaming": streaming.__file__, "version": streaming.__version__})
    while True:
        request = _receive(requests)
        if request is None:
            return
        name, kwargs = request
        try:
            _send(replies, ("ok", operations.OPERATIONS[name](**kwargs)))
        except Exception:
            _send(replies, ("crash", traceback.format_exc()))


if __name__ == "__main__":
    main()
