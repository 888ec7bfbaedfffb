"""Which checkpoints ``load_state_dict`` accepts: every value in range for the dataset it resumes.

A checkpoint is read from a file, so it is checked like an index: ``epoch``, ``sample_in_epoch``,
``num_canonical_nodes`` and ``shuffle_seed`` must be integers, ``initial_physical_nodes`` (optional in upstream's
older checkpoints) None or an integer, each within the range below, and the epoch plan it asks for, when it is
built whole, must fit in memory (`plan_memory.check_plan_memory`, sized with the checkpoint's own canonical and
initial nodes; a share computed as it is read, `streamed_share`, needs no whole plan, so a billion-sample epoch
resumes on a machine that cannot hold its plan). Anything
else is refused with `InvalidCheckpointError` (a ValueError, and the KeyError upstream raises for a missing key)
naming the key, before it can take effect. Unchecked, ``num_canonical_nodes = 10**9`` allocated gigabytes past
the memory check, ``10**6`` made a one-million-sample epoch of a 100-sample dataset, and ``sample_in_epoch = -5``
yielded only the epoch's last five samples.

An empty dict resumes nothing. The ranges hold every checkpoint MosaicML Streaming writes for the same dataset
(`CheckpointBounds`):

* ``epoch`` from -1 (a checkpoint taken before the first epoch, which a resume ignores);
* ``num_canonical_nodes`` from 1 to the largest of the epoch's samples, 64 per node (upstream's default for the
  ``py1s``/``py2s`` shuffles, which may exceed a small dataset) of this run or of the checkpoint's first run, and
  the dataset's own ``num_canonical_nodes`` argument;
* ``initial_physical_nodes`` from 1 to the larger of the epoch's samples and this run's nodes;
* ``sample_in_epoch`` from 0 to the positions of the epoch: its samples, padded to whole canonical nodes and to
  this run's ranks (past them upstream refuses too, at the first epoch).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streaming.dataset.errors import InvalidCheckpointError
from streaming.dataset.plan_memory import check_plan_memory, plan_positions

#: Canonical nodes per physical node that upstream's default gives the ``py1s`` and ``py2s`` shuffles.
CANONICAL_NODES_PER_NODE = 64
#: Epochs and seeds stay far below int64's limit: seeds add the epoch, and counters are stored as int64.
LARGEST_COUNTER = 2**62


def _built_whole(num_canonical_nodes: int, initial_physical_nodes: int, sample_in_epoch: int) -> bool:
    return True


@dataclass(frozen=True)
class CheckpointBounds:
    """What the resuming dataset knows: its epoch's samples, this run's nodes and ranks (the replicated world's),
    its ``num_canonical_nodes`` argument (None when not given), and its batch size for the memory check.

    ``built_whole`` says whether the epoch a checkpoint resumes (its canonical nodes, initial physical nodes and
    position) is planned whole, which the memory check sizes; a share computed as it is read holds a window of
    the epoch whatever its size, so its plan is not sized.
    """

    epoch_size: int
    num_nodes: int
    num_ranks: int
    num_canonical_nodes: int | None
    batch_size: int | None
    built_whole: Callable[[int, int, int], bool] = _built_whole


def _shown(value: Any) -> str:
    """A checkpoint value for a message: its repr (control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _integer(obj: Mapping[str, Any], key: str, low: int, high: int, why: str) -> int:
    value = obj[key]
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise InvalidCheckpointError(
            f"load_state_dict: the checkpoint's {key!r} must be an integer, got {_shown(value)}."
        )
    if not low <= int(value) <= high:
        raise InvalidCheckpointError(
            f"load_state_dict: the checkpoint's {key!r} is {int(value)}, outside {low}..{high} ({why}); the "
            f"checkpoint is corrupt, crafted or taken on another dataset."
        )
    return int(value)


def checked_checkpoint(obj: Any, bounds: CheckpointBounds) -> dict[str, Any]:
    """The checkpoint with its values as Python ints, or refused: a value out of range for the dataset
    (`CheckpointBounds`), or a plan too big.

    Raises:
        InvalidCheckpointError: naming the key and its value.
        PlanMemoryError: the plan the checkpoint asks for would not fit in memory.
    """
    if not isinstance(obj, Mapping):
        raise InvalidCheckpointError(f"load_state_dict: a checkpoint is a dict, got {type(obj).__name__}.")
    if not obj:
        return {}  # nothing to resume (as ever here; upstream raises KeyError at the next epoch)
    missing = [key for key in ("epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed") if key not in obj]
    if missing:
        raise InvalidCheckpointError(
            f"load_state_dict: the checkpoint lacks {missing} (it has {sorted(map(str, obj))[:10]})."
        )
    size = bounds.epoch_size
    epoch = _integer(obj, "epoch", -1, LARGEST_COUNTER, "-1 is a checkpoint taken before the first epoch")
    seed = _integer(obj, "shuffle_seed", 0, LARGEST_COUNTER, "seeds are non-negative")
    initial_nodes = None
    if obj.get("initial_physical_nodes") is not None:
        initial_nodes = _integer(
            obj,
            "initial_physical_nodes",
            1,
            max(size, bounds.num_nodes),
            f"at most the epoch's {size} samples or this run's {bounds.num_nodes} nodes",
        )
    nodes = max(bounds.num_nodes, initial_nodes or 1)
    most_canonical = max(size, CANONICAL_NODES_PER_NODE * nodes, bounds.num_canonical_nodes or 0)
    canonical = _integer(
        obj,
        "num_canonical_nodes",
        1,
        most_canonical,
        f"at most the epoch's {size} samples, {CANONICAL_NODES_PER_NODE} per node of {nodes}, or the dataset's "
        f"num_canonical_nodes",
    )
    positions = plan_positions(size, canonical, nodes)
    sample_in_epoch = _integer(
        obj,
        "sample_in_epoch",
        0,
        positions + bounds.num_ranks,
        f"the epoch's {size} samples padded to {canonical} canonical nodes and {bounds.num_ranks} ranks",
    )
    if bounds.built_whole(canonical, nodes, sample_in_epoch):
        check_plan_memory(size, bounds.num_ranks, bounds.batch_size or 1, "this checkpoint", canonical, nodes)
    numbers_of = {"epoch": epoch, "sample_in_epoch": sample_in_epoch, "num_canonical_nodes": canonical}
    return {**obj, **numbers_of, "shuffle_seed": seed, "initial_physical_nodes": initial_nodes}
