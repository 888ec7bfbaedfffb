"""`SharedBarrier`: upstream's inter-process barrier, a counter block plus a lock file, for user code.

The counters (entered, exited, open flag) live in a named block of :mod:`shared_memory`; the lock is a byte-range
lock of this package's lock files, which the kernel releases if its holder dies and which any process (not only
the one that built the barrier) may take.
"""

from __future__ import annotations

import os
import time
from types import TracebackType
from typing import Any

import numpy as np

from streaming.compat.coordination_names import TICK
from streaming.compat.shared_memory import SharedArray
from streaming.dataset.coordination import lockfile

_LOCK_OFFSET = 0


class BarrierLock:
    """An exclusive inter-process lock on a file (also excluding the other threads of this process)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file, _ = lockfile.open_shared(path, create=True)

    def acquire(self) -> None:
        self._file.acquire(_LOCK_OFFSET)

    def release(self) -> None:
        self._file.release(_LOCK_OFFSET)

    def __enter__(self) -> BarrierLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()


class SharedBarrier:
    """A barrier for a set number of processes on one machine.

    Build it once (say, in the process of a rank) and call it from every process that shares it, including
    processes it was pickled or forked to: ``barrier(num_procs)`` returns once ``num_procs`` callers have entered,
    and can be used again for the next round.

    Args:
        filelock_path: the lock file (created if missing).
        shm_name: the name of the block that holds the counters.
    """

    def __init__(self, filelock_path: str, shm_name: str) -> None:
        self.filelock_path = filelock_path
        self._lock: BarrierLock | None = None
        self._lock_pid: int | None = None
        self._arr = SharedArray(3, np.int32, shm_name)
        if self._arr.shm.created:
            self.num_enter = 0
            self.num_exit = -1
            self.flag = True

    @property
    def lock(self) -> BarrierLock:
        """This process's lock (a process forked or unpickled from the builder opens its own)."""
        if self._lock is None or self._lock_pid != os.getpid():
            self._lock = BarrierLock(self.filelock_path)
            self._lock_pid = os.getpid()
        return self._lock

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_lock": None, "_lock_pid": None}

    @property
    def num_enter(self) -> int:
        """How many processes have entered the current round."""
        return int(self._arr[0])

    @num_enter.setter
    def num_enter(self, value: int) -> None:
        self._arr[0] = value

    @property
    def num_exit(self) -> int:
        """How many processes have left the last round (-1 before the first call)."""
        return int(self._arr[1])

    @num_exit.setter
    def num_exit(self, value: int) -> None:
        self._arr[1] = value

    @property
    def flag(self) -> bool:
        """Whether the current round is complete (its processes may leave)."""
        return bool(self._arr[2])

    @flag.setter
    def flag(self, value: bool) -> None:
        self._arr[2] = bool(value)

    def __call__(self, num_procs: int) -> None:
        """Enter, wait until ``num_procs`` processes have entered, and leave."""
        while True:
            with self.lock:
                if self.num_exit == -1:
                    self.num_exit = num_procs  # the first round: nobody is still leaving an earlier one
                # Enter a round in progress, or start one once every process has left the previous round
                # (else a slow leaver would see the gate close again and wait forever).
                if self.num_enter or self.num_exit == num_procs:
                    if not self.num_enter:
                        self.flag = False
                    self.num_enter += 1
                    if self.num_enter == num_procs:
                        self.num_enter = 0
                        self.num_exit = 0
                        self.flag = True
                    break
            time.sleep(TICK)
        while not self.flag:
            time.sleep(TICK)
        with self.lock:
            self.num_exit += 1
