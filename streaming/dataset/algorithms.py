"""Unknown ``shuffle_algo`` and ``partition_algo`` names, warned of when a dataset is built.

MosaicML Streaming looks each name up only when it builds a partition or a shuffle (at the start of an epoch,
and the shuffle only with ``shuffle=True``), so code that passes a name it no longer has (``py1b``, removed
upstream in 0.11) still builds its dataset and, without shuffling, reads it. This package looks the names up at
the same moments (`partition.get_partitions`, `shuffle.get_shuffle` raise `UnknownAlgorithmError` there); here
a dataset only warns, at construction, of a name that will fail when it is used or is never used at all.
"""

from __future__ import annotations

import warnings

from streaming.dataset.partition import partition_algos
from streaming.dataset.shuffle import shuffle_algos


def warn_unknown_algorithms(shuffle: bool, shuffle_algo: str, partition_algo: str) -> None:
    """Warn of a ``shuffle_algo`` or ``partition_algo`` no shuffle or partition knows, saying when it matters."""
    if shuffle_algo not in shuffle_algos:
        when = (
            "the first epoch will raise UnknownAlgorithmError"
            if shuffle
            else "it is unused while shuffle=False; setting shuffle=True would raise UnknownAlgorithmError"
        )
        warnings.warn(f"Unknown shuffle_algo {shuffle_algo!r} (known: {sorted(shuffle_algos)}): {when}.", stacklevel=3)
    if partition_algo not in partition_algos:
        warnings.warn(
            f"Unknown partition_algo {partition_algo!r} (known: {sorted(partition_algos)}): the first epoch will "
            f"raise UnknownAlgorithmError.",
            stacklevel=3,
        )
