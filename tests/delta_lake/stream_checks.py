"""What every stream over a table Delta Lake wrote must keep, checked the same way whatever names the table.

The guarantees of an MDS stream, on a Delta stream: the same order on a re-run, one rank's checkpoint resumed by two
ranks yielding exactly the rest of the epoch (from the pinned version, though the table moved on meanwhile), and
mixing with an MDS stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.helpers import as_rank, mixed_with_an_mds_stream

#: The position of the checkpoint the resumption starts from (samples into epoch 0).
CHECKPOINT_AT = 150
#: The id of the row `check_order_resumption_and_mixing` commits to make the table move on.
LATE_ID = 5000


def check_order_resumption_and_mixing(
    make: Callable[[str], Any],
    remote: str,
    first: list[int],
    state: dict[str, Any],
    pinned: int,
    move_on: Callable[[int], None],
    live: set[int],
    tmp_path: Any,
    batch_size: int = 8,
) -> None:
    """``first``: an epoch's ids from ``make("a")`` (a dataset over the table, given its cache folder), ``state`` its
    checkpoint at `CHECKPOINT_AT`; ``move_on(LATE_ID)`` commits a row of that id; ``live``: the pinned version's ids."""

    assert [int(s["id"]) for s in make("b")] == first
    state = json.loads(json.dumps({**state, "epoch": 0}))
    move_on(LATE_ID)
    rest = []
    for rank in range(2):
        with as_rank(rank, 2):
            resumed = make(f"r{rank}")
            assert resumed.streams[0].version == pinned + 1
            resumed.load_state_dict(state)
            assert resumed.streams[0].version == pinned
            rest.extend(int(s["id"]) for s in resumed)
    # Every sample of the epoch is read once across the two runs, but for the padding the world size decides.
    assert set(first[:CHECKPOINT_AT]) | set(rest) == set(first)
    assert abs(CHECKPOINT_AT + len(rest) - len(first)) < 2 * batch_size

    ids = [int(s["id"]) for s in mixed_with_an_mds_stream(remote, tmp_path, batch_size)]
    assert len(ids) == 200 and sum(i >= 10_000 for i in ids) == 100
    assert set(ids) - set(range(10_000, 10_100)) <= live | {LATE_ID}  # the newest version holds the late row
