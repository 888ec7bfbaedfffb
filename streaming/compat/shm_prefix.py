"""`get_shm_prefix`: upstream's numbered prefix for a dataset's named blocks, for user code that still calls it.

The local leader takes the lowest number whose ``<number:06>_locals`` block does not exist and publishes its
streams' local directories in that block; the other processes of the node find the block that lists the same
directories. Unlike upstream, no ``torch.distributed`` barrier is needed: followers look for the leader's block
instead of recomputing the number, so the leader may publish before or after they start looking.
"""

from __future__ import annotations

import struct
import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from streaming.compat.coordination_names import LOCALS, TICK
from streaming.compat.shared_memory import SharedMemory

if TYPE_CHECKING:
    from streaming.dataset.world import World

_SIZE = struct.Struct("<i")


def _block_name(prefix_int: int, name: str) -> str:
    return f"{prefix_int:06}_{name}"


def _pack_locals(dirnames: list[str], prefix_int: int) -> bytes:
    """Upstream's layout: int32 total size, then the directories and the prefix joined by NULs."""
    data = ("\0".join(dirnames) + f"\0{prefix_int}").encode("utf-8")
    return _SIZE.pack(_SIZE.size + len(data)) + data


def _unpack_locals(data: bytes) -> tuple[list[str], int]:
    (size,) = _SIZE.unpack_from(data)
    *dirnames, prefix = data[_SIZE.size : size].decode("utf-8").split("\0")
    return dirnames, int(prefix or 0)


def _published() -> Iterator[tuple[int, list[str]]]:
    """(prefix, local directories) of every live block from prefix 0 up to the first free one."""
    prefix_int = 0
    while True:
        try:
            block = SharedMemory(_block_name(prefix_int, LOCALS), False, auto_cleanup=False)
        except FileNotFoundError:
            return
        try:
            dirnames, _ = _unpack_locals(bytes(block.buf))
        finally:
            block.cleanup()
        yield prefix_int, dirnames
        prefix_int += 1


def _first_free(streams_local: list[str], streams_remote: list[str | None]) -> int:
    """The first unused prefix; raise if a live dataset with a remote uses one of our local directories."""
    prefix_int = 0
    for prefix_int, their_locals in _published():
        reused = [
            local
            for local, remote in zip(streams_local, streams_remote)
            if remote is not None and local in their_locals
        ]
        if reused:
            raise ValueError(
                f"Reused local directory: {streams_local} vs {their_locals}. Provide a different one. If using a "
                f"unique local directory, try deleting the local directory and call "
                f"`streaming.base.util.clean_stale_shared_memory()` only once in your script to clean up the stale "
                f"shared memory before instantiation of `StreamingDataset`."
            )
        prefix_int += 1
    return prefix_int


def get_shm_prefix(
    streams_local: list[str], streams_remote: list[str | None], world: World, retry: int = 100
) -> tuple[int, SharedMemory]:
    """Register (local leader) or look up (other processes) the prefix of this dataset's named blocks.

    Args:
        streams_local: each stream's local directory.
        streams_remote: each stream's remote, or ``None``.
        world: who this process is (its ``is_local_leader`` decides the role).
        retry: how many times the leader retries after finding a reused directory (its user may be exiting),
            and how many ticks times 10 a follower waits for the leader's block.

    Returns:
        The prefix and the ``<prefix:06>_locals`` block (kept alive by the caller).

    Raises:
        ValueError: a directory is listed twice, or a live dataset with a remote uses one of them.
        TimeoutError: a follower found no block of its leader in time.
    """
    if retry < 0:
        raise ValueError(f"Specify at least zero retries (provided {retry}).")
    duplicates = [dirname for dirname, count in Counter(streams_local).items() if count > 1]
    if duplicates:
        raise ValueError(f"Reused local directory: {duplicates}. Provide a different one.")
    if world.is_local_leader:
        for attempt in range(retry + 1):
            try:
                prefix_int = _first_free(streams_local, streams_remote)
            except ValueError:
                if attempt == retry:
                    raise
                time.sleep(TICK)
                continue
            data = _pack_locals(streams_local, prefix_int)
            try:
                block = SharedMemory(_block_name(prefix_int, LOCALS), True, len(data))
            except FileExistsError:
                continue  # another leader took this number meanwhile: look again
            block.buf[: len(data)] = data
            return prefix_int, block
        raise RuntimeError(f"No free shared memory prefix found in {retry + 1} attempts.")
    deadline = time.monotonic() + max(1, retry) * 10 * TICK
    while True:
        for prefix_int, their_locals in _published():
            if their_locals == streams_local:
                return prefix_int, SharedMemory(_block_name(prefix_int, LOCALS), False)
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"The local leader published no shared memory prefix for local directories {streams_local}: "
                f"is the local rank 0 process running and building the same dataset?"
            )
        time.sleep(TICK)
