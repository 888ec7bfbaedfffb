"""``py1s`` and ``py1br`` orders of one canonical node, produced block by block as they are read.

`shuffle.get_shuffle_py1s` and `shuffle.get_shuffle_py1br` build the epoch's whole order; on one canonical node
both draw their shuffles in position order, so the order can be handed out a block at a time with the same draws
in the same sequence:

* ``py1s``: each shard piece, in the node's shuffled piece order, is shuffled in turn: a piece's ids are final as
  soon as it is shuffled.
* ``py1br``: the node's pieces are laid out in that order, the random block bounds are all drawn first (one draw
  per block), then each block is shuffled in turn. Consecutive blocks overlap (a block starts ``stagger``
  before the previous one's end), so a position is final only once no later block starts at or before it:
  the ids below the next block's start. The last block may end up to ``stagger`` positions before the node does;
  those stay in layout order.

Memory follows the largest piece or block, not the epoch. A reader resuming at a position still draws every
shuffle before it (numpy's shuffle draws a number of words that depends on the values drawn, so its generator
cannot be advanced without drawing them), but ``py1s`` shuffles a scratch array in place for those pieces and
keeps nothing of them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

#: Ids of consecutive ``py1s`` pieces handed over at once (per-call costs vanish; a few MiB).
CHUNK_SAMPLES = 1 << 20

#: An epoch order as ``(position of its first id, ids)`` chunks, consecutive from the first, which may start
#: after position 0 when the caller skips to a later position.
OrderChunks = Iterator[tuple[int, NDArray[np.int64]]]


def py1s_chunks(
    rng: np.random.Generator, begins: NDArray[np.int64], sizes: NDArray[np.int64], skip_to: int = 0
) -> OrderChunks:
    """``py1s`` on one canonical node: ``begins``/``sizes`` of the pieces in the node's shuffled order, ``rng``
    the epoch generator as the piece shuffle leaves it. Chunks start at the piece holding ``skip_to``."""
    ends = np.cumsum(sizes)
    skipped = int(np.searchsorted(ends, skip_to, "right"))
    scratch = np.empty(int(sizes[:skipped].max()) if skipped else 0, np.int64)
    for size in sizes[:skipped].tolist():
        if size > 1:
            rng.shuffle(scratch[:size])
    position = int(ends[skipped - 1]) if skipped else 0
    parts: list[NDArray[np.int64]] = []
    held = 0
    chunk_start = position
    last = len(sizes) - 1
    for piece in range(skipped, len(sizes)):
        begin, size = int(begins[piece]), int(sizes[piece])
        ids = np.arange(begin, begin + size, dtype=np.int64)
        if size > 1:
            rng.shuffle(ids)
        parts.append(ids)
        held += size
        if held >= CHUNK_SAMPLES or piece == last:
            yield chunk_start, np.concatenate(parts) if len(parts) > 1 else parts[0]
            chunk_start += held
            parts, held = [], 0


def py1br_blocks(rng: np.random.Generator, num_samples: int, low: int, high: int) -> list[tuple[int, int]]:
    """Draw the ``(start, stop)`` positions of one canonical node's ``py1br`` blocks (its stagger, then every
    block's size), as the whole plan draws them."""
    stagger = int(rng.integers(0, low, 1)[0])
    blocks = []
    end = 0
    while end < num_samples:
        drawn = int(rng.integers(low, high))
        start = max(end - stagger, 0)
        stop = min(end + drawn - stagger, num_samples)
        blocks.append((start, stop))
        end += stop - start
    return blocks


def _layout(begins: NDArray[np.int64], sizes: NDArray[np.int64], start: int, stop: int) -> NDArray[np.int64]:
    """Positions ``start:stop`` of the pieces laid out one after another (sample ids, unshuffled)."""
    ends = np.cumsum(sizes)
    first = int(np.searchsorted(ends, start, "right"))
    last = int(np.searchsorted(ends, stop, "left"))
    piece_starts = ends[first : last + 1] - sizes[first : last + 1]
    lengths = sizes[first : last + 1]
    ids = np.repeat(begins[first : last + 1] - piece_starts, lengths) + np.arange(
        int(piece_starts[0]), int(piece_starts[0] + lengths.sum()), dtype=np.int64
    )
    return ids[start - int(piece_starts[0]) : stop - int(piece_starts[0])]


def py1br_chunks(
    rng: np.random.Generator, begins: NDArray[np.int64], sizes: NDArray[np.int64], low: int, high: int, skip_to: int = 0
) -> OrderChunks:
    """``py1br`` on one canonical node (arguments as `py1s_chunks`; ``low``/``high`` bound the block sizes).

    Every block is shuffled in turn from the start, as overlapping blocks carry ids into the next; the ids below
    ``skip_to``'s block are dropped as they become final, so a resumed reader holds a block, not the epoch.
    """
    num_samples = int(sizes.sum())
    blocks = py1br_blocks(rng, num_samples, low, high)
    window = np.zeros(0, np.int64)
    window_start = 0  # position of window[0]
    for index, (start, stop) in enumerate(blocks):
        have_to = window_start + len(window)
        if stop > have_to:
            window = np.concatenate([window, _layout(begins, sizes, have_to, stop)])
        rng.shuffle(window[start - window_start : stop - window_start])
        final_to = blocks[index + 1][0] if index + 1 < len(blocks) else num_samples
        if final_to > window_start + len(window):
            # The blocks stop once their running length passes the node's end, which leaves up to ``stagger``
            # positions after the last block unshuffled, as the whole plan does.
            window = np.concatenate([window, _layout(begins, sizes, window_start + len(window), final_to)])
        if final_to > window_start:
            done = final_to - window_start
            if final_to > skip_to:
                yield window_start, window[:done].copy()
            window, window_start = window[done:], final_to
