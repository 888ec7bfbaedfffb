"""`ShiftedOrder`: one canonical node's ``py1e`` order, sorted a window at a time.

``py1e`` shuffles every shard piece of a node, then moves each sample from its position ``k`` to ``k + shift``
(a uniform draw bounded by half the piece's random block, so by less than ``high / 2``) and orders the node by
those keys. Sorting the whole node at once held three arrays of its size (samples, keys, the argsort) and spent
most of an epoch's planning in one ``argsort``. A sample can move by less than ``high / 2``, so once the pieces
up to position ``p`` have their keys, every key below ``p - high / 2`` is final: the keys are merged a few
million at a time and the prefix below that bound is written out, and each piece's shuffled samples are
produced again from the generator state saved before its shuffle, only while its window is open. A reader that
resumes deep in the epoch skips the pieces wholly before its position: their shifts are drawn past by advancing
the generator (one 64-bit word per uniform double), so resuming costs a window, not the epoch before it.

Equal keys: the sorted order of distinct keys is unique, so it is the reference's whatever the sort. Two samples
whose shifted positions are exactly equal (a float64 collision: about one per 10^8 samples of a node) are kept
in position order here; the reference's ``np.argsort`` (an unstable sort whose kernel numpy picks by the CPU's
instruction set) orders them as that kernel happens to, which differs between machines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

#: Keys merged at once: large enough that a sort's per-call cost vanishes, small next to an epoch (64 MiB of
#: keys and ids).
MERGE_SAMPLES = 1 << 22

#: Final positions the first merge waits for (the first sample waits for that merge).
FIRST_SAMPLES = 1 << 18

_LOW_64 = (1 << 64) - 1

#: Pieces between two saved generator states: a piece's shuffle is replayed from the state saved before the
#: first of its group (a resumed reader replays at most this many pieces; saving every piece's state cost more
#: than a microsecond each, seconds at a million shards).
STATE_EVERY = 64


def _save(generator: np.random.Generator) -> tuple[int, int, int, int]:
    """A PCG64 generator's state as four uint64 words: the 128-bit state's high and low halves, ``has_uint32``
    and ``uinteger`` (its increment never changes, so it is not kept)."""
    state = generator.bit_generator.state
    word = state["state"]["state"]
    return word >> 64, word & _LOW_64, state["has_uint32"], state["uinteger"]


def _restore(generator: np.random.Generator, saved: NDArray[np.uint64], increment: int) -> None:
    high, low, has_uint32, uinteger = (int(word) for word in saved)
    generator.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (high << 64) | low, "inc": increment},
        "has_uint32": has_uint32,
        "uinteger": uinteger,
    }


def equal_keys_in_position_order(
    keys: NDArray[np.float64], ids: NDArray[np.int64], order: NDArray[np.int64], positions: NDArray[np.int64]
) -> None:
    """Put each run of equal sorted ``keys`` in position order, in place: ``ids`` and ``order`` (the unstable
    argsort that sorted them) are reordered within the run; ``positions`` are in the unsorted order."""
    equal = np.flatnonzero(keys[1:] == keys[:-1])
    if not len(equal):
        return
    # Runs of consecutive equal pairs: a run starts where a pair does not continue the previous one.
    breaks = np.diff(equal) > 1
    starts = equal[np.concatenate([[True], breaks])]
    stops = equal[np.concatenate([breaks, [True]])] + 2
    for start, stop in zip(starts.tolist(), stops.tolist()):
        run = order[start:stop]
        by_position = np.argsort(positions[run], kind="stable")
        ids[start:stop] = ids[start:stop][by_position]
        order[start:stop] = run[by_position]


class ShiftedOrder:
    """One canonical node's ``py1e`` order, produced as consecutive chunks of sample ids (iterate it).

    Args:
        rng: the epoch generator, drawn from exactly as the reference draws (each piece's shuffle at
            construction, then each piece's block size and shifts as iteration reaches it).
        begins: first sample id of each of the node's pieces, in the node's order.
        sizes: samples of each piece.
        low: smallest random block size; high: one past the largest.
        merge_samples: keys merged at once (at least ``high``).
        states: the ``states`` of an earlier `ShiftedOrder` of the same node and generator state (one row per
            `STATE_EVERY` pieces, and the last); ``rng`` is then moved to where the shuffles leave it instead of
            drawing them again.

    ``piece_larger_than_block`` tells, once iteration has ended, whether a piece outgrew its block (the
    reference warns then).
    """

    def __init__(
        self,
        rng: np.random.Generator,
        begins: NDArray[np.int64],
        sizes: NDArray[np.int64],
        low: int,
        high: int,
        merge_samples: int = MERGE_SAMPLES,
        states: NDArray[np.uint64] | None = None,
    ) -> None:
        state = rng.bit_generator.state
        if state["bit_generator"] != "PCG64":
            raise TypeError(f"py1e's epoch generator must be a PCG64 to be replayed, not {state['bit_generator']}.")
        self._increment = state["state"]["inc"]
        self._rng = rng
        self._begins = begins.tolist()
        self._sizes = sizes.tolist()
        self._low, self._high = low, high
        self._merge_at = max(merge_samples, high)
        self.num_samples = int(sizes.sum())
        self.piece_larger_than_block = False
        # The shuffles come first in the generator's stream: draw them now (their values are not kept), saving
        # the state every `STATE_EVERY` pieces start from, so that a piece's samples are shuffled again when its
        # window opens (the pieces in between replayed); the last row is the state the shifts start from. Readers
        # of one node share them (``states``). numpy's shuffle draws as many words as its rejections need, so
        # the generator cannot be advanced past a shuffle without drawing it: this walk is the one part of the
        # order that grows with the epoch's samples (about 9 ns a sample here).
        rows = -(-len(self._sizes) // STATE_EVERY) + 1
        if states is None:
            saved = []
            scratch = np.empty(max(self._sizes, default=0), np.int64)
            for piece, size in enumerate(self._sizes):
                if piece % STATE_EVERY == 0:
                    saved.append(_save(rng))
                if size > 1:
                    rng.shuffle(scratch[:size])
            saved.append(_save(rng))
            states = np.array(saved, np.uint64).reshape(-1, 4)
        elif states.shape != (rows, 4):
            raise ValueError(f"py1e's saved states are {states.shape}, not ({rows}, 4).")
        else:
            _restore(rng, states[-1], self._increment)
        self.states = states

    def __iter__(self) -> Iterator[NDArray[np.int64]]:
        for _, ids in self.chunks():
            yield ids

    def _pieces_before(self, position: int) -> tuple[int, int]:
        """How many leading pieces a reader starting at ``position`` may skip, and the samples they hold.

        The first id yielded after skipping the pieces up to offset ``o`` is at most ``o + high + 1`` (only the
        ``high + 1`` positions after ``o`` can hold keys the skipped samples might precede), so pieces ending by
        ``position - high - 1`` are skipped."""
        ends = np.cumsum(np.array(self._sizes, np.int64))
        skipped = int(np.searchsorted(ends, position - self._high - 1, "right"))
        return skipped, int(ends[skipped - 1]) if skipped else 0

    def _advance(self, draws: int) -> None:
        """Move the epoch generator past ``draws`` uniform doubles (one 64-bit word each) without drawing them,
        keeping the half word an earlier bounded draw left for the next one."""
        bit_generator = cast(np.random.PCG64, self._rng.bit_generator)  # checked at construction
        before = bit_generator.state
        bit_generator.advance(draws)
        after = {**bit_generator.state, "has_uint32": before["has_uint32"], "uinteger": before["uinteger"]}
        bit_generator.state = cast(Any, after)

    def chunks(self, skip_to: int = 0) -> Iterator[tuple[int, NDArray[np.int64]]]:
        """The order as ``(position of its first id, ids)`` chunks, consecutive from the first.

        With ``skip_to``, the first chunk starts at or before that position but may start well after 0: the pieces
        whose samples all come before it have their block and shifts drawn past (the generator advanced, nothing
        shuffled or sorted), so a share resumed deep in the epoch starts in the time of a fresh one.
        """
        replay = np.random.Generator(np.random.PCG64())
        replay_at = -1  # the piece whose shuffle the replay generator draws next
        draw_block, draw_shifts = self._rng.integers, self._rng.uniform
        num_samples, high = self.num_samples, self._high
        held_keys = np.zeros(0, np.float64)
        merged = False
        held_ids = np.zeros(0, np.int64)
        held_positions = np.zeros(0, np.int64)
        new: list[tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]] = []
        new_count = 0
        offset = 0
        last = len(self._sizes) - 1
        skipped, skipped_samples = self._pieces_before(skip_to)
        # Keys below this may belong to a skipped sample: the samples holding them are dropped, and the order
        # resumes at the first key above it, whose position counts every skipped sample.
        drop_below = skipped_samples + high / 2 + 1 if skipped else None
        position = skipped_samples  # of the next id yielded
        first_at = skipped_samples + (high + 2 if skipped else high / 2) + FIRST_SAMPLES
        for piece, (size, begin) in enumerate(zip(self._sizes, self._begins)):
            cutoff = (int(draw_block(self._low, high)) - size) / 2
            if cutoff < 0:
                cutoff = 0.0
                self.piece_larger_than_block = True
            if piece < skipped:
                self._advance(size)
                offset += size
                continue
            lower = max(-cutoff, -offset)
            upper = min(cutoff, num_samples - offset - size)
            positions = np.arange(offset, offset + size, dtype=np.int64)
            keys = positions.astype(np.float64)
            keys += draw_shifts(lower, upper, size)
            samples = np.arange(begin, begin + size, dtype=np.int64)
            if replay_at != piece:
                group = piece // STATE_EVERY
                _restore(replay, self.states[group], self._increment)
                for earlier in self._sizes[group * STATE_EVERY : piece]:
                    if earlier > 1:
                        replay.shuffle(np.empty(earlier, np.int64))
            if size > 1:
                replay.shuffle(samples)
            replay_at = piece + 1
            new.append((keys, samples, positions))
            new_count += size
            offset += size
            # The first merge comes as soon as a little of the order is final: it is what the first sample waits for.
            first_ready = not merged and offset >= first_at
            if new_count < self._merge_at and piece != last and not first_ready:
                continue
            # Every later piece starts at or after ``offset`` and moves back by less than high / 2 (the 1 covers
            # the rounding of a key's addition): keys below that bound have all arrived.
            bound = offset - high / 2 - 1 if piece != last else np.inf
            keys = np.concatenate([held_keys, *(part[0] for part in new)])
            order = np.argsort(keys)
            keys = keys[order]
            ids = np.concatenate([held_ids, *(part[1] for part in new)])[order]
            positions = np.concatenate([held_positions, *(part[2] for part in new)])
            equal_keys_in_position_order(keys, ids, order, positions)
            done = int(np.searchsorted(keys, bound, "left"))
            if drop_below is not None:
                if bound < drop_below:
                    done = 0  # the samples that may follow a skipped one have not all arrived
                else:
                    dropped = int(np.searchsorted(keys, drop_below, "left"))
                    keys, ids, order = keys[dropped:], ids[dropped:], order[dropped:]
                    position += dropped
                    done -= dropped
                    drop_below = None
            if done:
                yield position, ids[:done]
                position += done
            held_keys, held_ids, held_positions = keys[done:], ids[done:], positions[order[done:]]
            merged = True
            del order, positions
            new, new_count = [], 0
