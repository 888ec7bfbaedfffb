"""What `py1e`'s walk over the shuffles costs, and whether counting its draws in bulk would be faster.

    python benchmarks/shuffle_walk.py [--pieces 100] [--piece 10000] [--rounds 2]

`py1e`'s first sample needs the epoch generator's state after numpy's ``Generator.shuffle`` of every shard piece
(`streaming.dataset.shift_order`). numpy shuffles by rejection (a masked 32-bit draw per try, kept when it is at
most the current index), so how many words a shuffle consumes depends on the words, and ``PCG64.advance`` cannot
jump past it without that count. This script times, on ``--pieces`` pieces of ``--piece`` samples, alternating
round after round:

* ``numpy``: the walk as `ShiftedOrder` does it, ``rng.shuffle`` of a scratch array per piece;
* ``raw words``: ``bit_generator.random_raw`` alone, in cache-sized chunks, for as many 64-bit words as the walk
  consumes: the least any method that looks at every drawn word pays;
* ``compiled``: `shuffle_walk.c`, compiled with the machine's C compiler (``cc -O3``): numpy's PCG64 steps and
  bounded draws inlined, without the swaps: what native code shipped with the package could at best do. Its
  final state is checked against numpy's, else the script fails; without a C compiler the row is left out, and
  the script says so.
* ``vectorised count``: an exact count of the draws without the swaps, in whole-array numpy passes. Each draw
  is kept when it is at most the index, which falls by one at every kept draw, so a draw's fate depends on the
  draws before it; per run of indices sharing a mask it iterates ``kept = word <= index - kept before`` to its
  fixed point (each pass fixes at least one more draw). Its count is checked against numpy's: the generator
  advanced by it must equal numpy's state after the walk, else the script fails.

Prints per-sample nanoseconds, what each comes to at 10^10 samples, and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: 64-bit words drawn per `random_raw` call: small enough to stay in cache, large enough to hide the call.
RAW_CHUNK = 1 << 14


def _state(rng: np.random.Generator) -> tuple[Any, int]:
    state = rng.bit_generator.state
    return state["state"], state["has_uint32"]


def numpy_walk(seed: int, sizes: list[int]) -> tuple[float, tuple[Any, int]]:
    """Seconds for numpy's shuffles of every piece, and the generator's state after them."""
    rng = np.random.default_rng(seed)
    scratch = np.empty(max(sizes), np.int64)
    start = time.perf_counter()
    for size in sizes:
        if size > 1:
            rng.shuffle(scratch[:size])
    return time.perf_counter() - start, _state(rng)


def shuffle_draws(words: NDArray[np.uint32], start: int, size: int) -> tuple[int, int]:
    """32-bit draws numpy's shuffle of ``size`` elements takes from ``words[start:]``, and the fixed-point passes."""
    position, high, passes = start, size - 1, 0
    while high >= 1:
        bits = high.bit_length()
        mask, low = np.uint32((1 << bits) - 1), 1 << (bits - 1)
        needed = high - low + 1  # kept draws for indices high..low, which share the mask
        length = int(needed * 2.2) + 64
        while True:
            values = (words[position : position + length] & mask).astype(np.int64)
            kept = values <= high  # a superset of the kept draws: the passes shrink it to the true ones
            end = -1
            for _ in range(length + 1):
                passes += 1
                now = values <= high - (np.cumsum(kept) - kept)
                end = int(np.searchsorted(np.cumsum(now), needed))
                if end < length and np.array_equal(now[: end + 1], kept[: end + 1]):
                    break
                kept, end = now, -1
            if end >= 0:
                break
            length *= 2  # not enough words drawn for this run
        position += end + 1
        high = low - 1
    return position - start, passes


def counted_walk(seed: int, sizes: list[int]) -> tuple[float, tuple[Any, int], int, int]:
    """Seconds for the vectorised count (drawing the words included), the state it implies, the 32-bit draws
    counted and the fixed-point passes."""
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    # At most 2.2 draws per element in any run of one mask, and the count extends a run that needs more.
    words = rng.bit_generator.random_raw(int(sum(sizes) * 1.2) + 1024).view(np.uint32)
    draws = passes = 0
    for size in sizes:
        if size > 1:
            taken, more = shuffle_draws(words, draws, size)
            draws += taken
            passes += more
    seconds = time.perf_counter() - start
    check = np.random.PCG64(seed)
    # Two draws per 64-bit word, low half first; an odd count leaves the last word's high half buffered.
    check.advance((draws + 1) // 2)
    return seconds, (check.state["state"], draws % 2), draws, passes


def compile_walk(folder: str) -> str | None:
    """`shuffle_walk.c` built in ``folder`` with the machine's C compiler, or None when it has none."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    binary = str(Path(folder) / "shuffle_walk")
    source = str(Path(__file__).with_name("shuffle_walk.c"))
    subprocess.run([compiler, "-O3", "-o", binary, source], check=True)
    return binary


def compiled_walk(binary: str, seed: int, piece: int, pieces: int) -> tuple[float, tuple[Any, int]]:
    """Seconds for the compiled walk over ``pieces`` shuffles of ``piece`` elements, and the state it reaches."""
    state = np.random.default_rng(seed).bit_generator.state
    word, increment = state["state"]["state"], state["state"]["inc"]
    halves = [word >> 64, word & (2**64 - 1), increment >> 64, increment & (2**64 - 1)]
    arguments = [*halves, state["has_uint32"], state["uinteger"], piece, pieces]
    done = subprocess.run([binary, *map(str, arguments)], check=True, capture_output=True, text=True)
    seconds, high, low, has_uint32, _ = done.stdout.split()
    return float(seconds), ({"state": (int(high) << 64) | int(low), "inc": increment}, int(has_uint32))


def raw_words(seed: int, count: int) -> float:
    """Seconds to draw ``count`` 64-bit words with ``random_raw``, a cache-sized chunk at a time."""
    generator = np.random.default_rng(seed).bit_generator
    start = time.perf_counter()
    for _ in range(count // RAW_CHUNK):
        generator.random_raw(RAW_CHUNK)
    generator.random_raw(count % RAW_CHUNK)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", type=int, default=100)
    parser.add_argument("--piece", type=int, default=10_000, help="samples per shard piece")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = [args.piece] * args.pieces
    samples = sum(sizes)
    times: dict[str, list[float]] = {"numpy": [], "raw words": [], "vectorised count": [], "compiled": []}
    scratch = tempfile.mkdtemp(prefix="shuffle-walk-")
    binary = compile_walk(scratch)
    if binary is None:
        print("no C compiler (cc or gcc): the compiled row is left out")
        del times["compiled"]
    words = passes = 0
    for round_ in range(args.rounds):
        seed = 9176 + round_
        seconds, numpy_state = numpy_walk(seed, sizes)
        times["numpy"].append(seconds)
        seconds, counted_state, draws, passes = counted_walk(seed, sizes)
        times["vectorised count"].append(seconds)
        if counted_state != numpy_state:
            raise SystemExit("WRONG COUNT: the vectorised count does not reach numpy's state after the shuffles")
        words = (draws + 1) // 2  # the walk's 64-bit words: two 32-bit draws each
        times["raw words"].append(raw_words(seed, words))
        if binary is not None:
            seconds, compiled_state = compiled_walk(binary, seed, args.piece, args.pieces)
            times["compiled"].append(seconds)
            if compiled_state != numpy_state:
                raise SystemExit("WRONG STATE: the compiled walk does not reach numpy's state after the shuffles")
    shutil.rmtree(scratch)
    summary = {side: statistics.median(values) / samples * 1e9 for side, values in times.items()}
    print(f"{args.pieces} pieces of {args.piece:,} samples, {args.rounds} rounds (medians)")
    print(f"{'walk':18} {'ns/sample':>10} {'at 10^10 samples (s)':>22}")
    for side, ns in summary.items():
        print(f"{side:18} {ns:10.2f} {ns * 10:22.0f}")
    print(f"64-bit words per sample: {words / samples:.3f}; fixed-point passes per piece: {passes / args.pieces:.1f}")
    print(f"vectorised count / numpy: {summary['vectorised count'] / summary['numpy']:.2f}x the time")
    print(json.dumps({"ns_per_sample": summary, "words_per_sample": words / samples, "passes": passes}))


if __name__ == "__main__":
    main()
