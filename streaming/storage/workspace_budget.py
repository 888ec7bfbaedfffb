"""A request budget per Databricks workspace, shared by every process of this machine.

A workspace's Files API answers 429 past about 10 concurrent requests and 100 a second (the Databricks CLI's own
client records those limits), counted for the whole workspace. A conversion's Spark tasks, a DataLoader's workers
and the driver are separate processes, so a limit kept per process or per client would multiply with them. Every
request to a workspace therefore takes a lease here first:

* a slot: one of ``concurrency`` lock files (``flock``) in a folder of this machine, held until the answer has
  been read, so at most ``concurrency`` requests are in flight from this machine at once;
* a start time: requests start at least ``1 / rate`` seconds apart, spaced through a small shared state file;
* after a throttled answer (429, or 503 with ``Retry-After``), no request of this machine starts before its
  ``Retry-After`` has passed (the SDK retries the throttled request itself after that wait).

Locks belong to their process, so a killed task never keeps a slot. The budget is per machine: processes on several
machines share the workspace's by dividing it among the machines. A conversion's driver counts the machines its
tasks run on (``MACHINES_ENV``, set by ``dataframe_to_mds`` for its tasks); a training run's nodes are
``WORLD_SIZE / LOCAL_WORLD_SIZE``, from the variables every rank (and its DataLoader workers) already has for
`StreamingDataset` (``LOCAL_WORLD_SIZE`` defaults to 1, as the dataset's does: one rank a node, at worst).
Defaults stay under the documented limits (8 in flight, 80 a second) so that other clients of the workspace keep
some room; ``CONCURRENCY_ENV`` and ``RATE_ENV`` change them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import random
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

#: The coordination root's override (streaming.dataset.coordination.root, a layer above this one): tests and
#: containers that move the node's coordination files move the budgets with them.
STATE_DIR_ENV = "STREAMING_STATE_DIR"
CONCURRENCY_ENV = "MDS_STREAMING_DATABRICKS_CONCURRENCY"
RATE_ENV = "MDS_STREAMING_DATABRICKS_RATE"
MACHINES_ENV = "MDS_STREAMING_DATABRICKS_MACHINES"
#: What the share depends on (a storage client is cached per their values).
ENV_VARS = (CONCURRENCY_ENV, RATE_ENV, MACHINES_ENV, "WORLD_SIZE", "LOCAL_WORLD_SIZE")
DEFAULT_CONCURRENCY = 8
DEFAULT_RATE = 80.0
_STATE = struct.Struct("<dd")  # the next start time and the end of a pause, both time.monotonic() seconds
_POLL_SECONDS = (0.002, 0.05)  # first and longest wait between looks for a free slot


@dataclass(frozen=True)
class Share:
    """What this machine may use of a workspace: requests in flight and requests started per second."""

    concurrency: int
    rate: float

    @classmethod
    def from_env(cls) -> Share:
        """The workspace budget from the environment, divided among the machines that share it."""
        concurrency = int(_positive(CONCURRENCY_ENV, DEFAULT_CONCURRENCY, whole=True))
        rate = _positive(RATE_ENV, DEFAULT_RATE)
        sharing = machines()
        return cls(max(1, concurrency // sharing), max(1.0, rate / sharing))


def machines() -> int:
    """How many machines share the workspace's budget: `MACHINES_ENV`, else a training run's nodes, else 1."""
    if os.environ.get(MACHINES_ENV, "").strip():
        return int(_positive(MACHINES_ENV, 1, whole=True))
    world = int(_positive("WORLD_SIZE", 1, whole=True))
    per_node = int(_positive("LOCAL_WORLD_SIZE", 1, whole=True))
    return max(1, world // per_node)


def _positive(name: str, default: float, whole: bool = False) -> float:
    """A positive number from the environment variable `name` (a whole one if asked), or `default` when unset."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{name}={text!r}: expected a positive {'whole ' if whole else ''}number.")
    return value


class Lease:
    """One request's slot; `release` frees it (once, whoever calls it first)."""

    def __init__(self, budget: WorkspaceBudget, slot: int) -> None:
        self._budget = budget
        self._slot: int | None = slot
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            slot, self._slot = self._slot, None
        if slot is not None:
            self._budget._free(slot)


class WorkspaceBudget:
    """The machine-wide budget of one workspace (one per process, host and share; see `budget_for`)."""

    def __init__(self, host: str, share: Share) -> None:
        self.host = host
        self.share = share
        digest = hashlib.sha256(host.encode()).hexdigest()[:16]
        self._prefix = os.path.join(_budget_folder(), f"databricks-{digest}")
        self._lock = threading.Lock()
        self._open()

    def _open(self) -> None:
        """Open this process's descriptors (again after a fork: a forked child must not share its parent's)."""
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        self._pid = os.getpid()
        self._held: set[int] = set()
        self._slots = [os.open(f"{self._prefix}.slot{i}", flags, 0o600) for i in range(self.share.concurrency)]
        self._state = os.open(f"{self._prefix}.state", flags, 0o600)

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            for fd in (*self._slots, self._state):
                os.close(fd)  # the parent's locks stay the parent's
            self._open()

    def lease(self) -> Lease:
        """Wait for a free slot and for this request's start time; the caller releases the lease after the answer."""
        slot = self._take_slot()
        try:
            delay = self._reserve_start()
            if delay > 0:
                time.sleep(delay)
        except BaseException:
            self._free(slot)
            raise
        return Lease(self, slot)

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """A lease held for the duration of the block."""
        lease = self.lease()
        try:
            yield
        finally:
            lease.release()

    def pause(self, seconds: float) -> None:
        """The workspace throttled a request: start no request from this machine for `seconds`."""
        with self._state_locked() as (next_start, paused_until):
            until = max(paused_until, time.monotonic() + seconds)
            os.pwrite(self._state, _STATE.pack(next_start, until), 0)

    def _take_slot(self) -> int:
        wait = _POLL_SECONDS[0]
        while True:
            with self._lock:
                self._check_fork()
                for index, fd in enumerate(self._slots):
                    if index in self._held:
                        continue  # flock would grant it again to this process's own descriptor
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    self._held.add(index)
                    return index
            time.sleep(wait * (0.5 + random.random()))
            wait = min(wait * 2, _POLL_SECONDS[1])

    def _free(self, slot: int) -> None:
        with self._lock:
            if self._pid != os.getpid() or slot not in self._held:
                return  # taken before a fork: the descriptor (and lock) were the parent's
            fcntl.flock(self._slots[slot], fcntl.LOCK_UN)
            self._held.discard(slot)

    def _reserve_start(self) -> float:
        """Book this request's start time (spaced `1 / rate` after the previous one, after any pause); the wait."""
        with self._state_locked() as (next_start, paused_until):
            now = time.monotonic()
            start = max(now, next_start, paused_until)
            os.pwrite(self._state, _STATE.pack(start + 1.0 / self.share.rate, paused_until), 0)
        return start - now

    @contextlib.contextmanager
    def _state_locked(self) -> Iterator[tuple[float, float]]:
        with self._lock:
            self._check_fork()
            fcntl.flock(self._state, fcntl.LOCK_EX)
            try:
                data = os.pread(self._state, _STATE.size, 0)
                yield _STATE.unpack(data) if len(data) == _STATE.size else (0.0, 0.0)
            finally:
                fcntl.flock(self._state, fcntl.LOCK_UN)


def _budget_folder() -> str:
    """This machine's folder of budget files: `STATE_DIR_ENV` when set, else a private one in the temp folder."""
    folder = os.environ.get(STATE_DIR_ENV) or os.path.join(tempfile.gettempdir(), f"mds-streaming-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


_budgets: dict[tuple[str, Share], WorkspaceBudget] = {}
_budgets_lock = threading.Lock()


def budget_for(host: str) -> WorkspaceBudget:
    """This process's budget for the workspace at `host` (scheme://host[:port]), with the environment's share."""
    key = (host, Share.from_env())
    with _budgets_lock:
        budget = _budgets.get(key)
        if budget is None:
            budget = _budgets[key] = WorkspaceBudget(host, key[1])
        return budget


def _after_fork_in_child() -> None:
    # A lock some other thread of the parent held at the fork would never be released in the child.
    global _budgets_lock
    _budgets_lock = threading.Lock()
    for budget in _budgets.values():
        budget._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
