"""What a checkpoint records of the dataset version it was taken on, and what a resume on another version does.

For a dataset that ``incremental_to_mds`` keeps (`streaming.format.dataset_version`), ``state_dict()`` adds one
key to upstream's five, `VERSION_KEY`: the shard list's fingerprint and the epoch's size. MosaicML Streaming
ignores keys it does not know, so it still resumes from such a checkpoint; every other dataset's checkpoint keeps
exactly upstream's keys. ``load_state_dict`` then compares the checkpoint's version with the dataset's:

* same version, or a checkpoint at the start of an epoch: resumed as it is;
* another version, with the checkpoint's epoch complete: remapped to the end of that epoch on the new version
  (the epoch yields nothing more, as it would have on the old one), with a warning;
* another version, mid-epoch: refused. The position counts samples of an order built from the old shard list,
  so on the new one it would silently skip or repeat samples;
* a checkpoint without a version (the reference's, or taken before the dataset was kept incrementally) mid-epoch
  on a versioned dataset: resumed with a warning that nothing could check it.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

#: The checkpoint key holding ``{"fingerprint": ..., "epoch_size": ...}``.
VERSION_KEY = "dataset_version"


def version_entry(fingerprint: str | None, epoch_size: int) -> dict[str, Any]:
    """The key to add to a checkpoint of a dataset at ``fingerprint`` (nothing for an unversioned dataset)."""
    if fingerprint is None:
        return {}
    return {VERSION_KEY: {"fingerprint": fingerprint, "epoch_size": int(epoch_size)}}


def checked_resume(obj: dict[str, Any], fingerprint: str | None, epoch_size: int) -> dict[str, Any]:
    """The checkpoint to resume from on a dataset at ``fingerprint``: ``obj``, remapped, or a ValueError."""
    epoch = obj.get("epoch")
    position = obj.get("sample_in_epoch", 0)
    recorded = obj.get(VERSION_KEY)
    if not isinstance(position, numbers.Integral) or position <= 0:  # numpy integers too
        return obj
    if recorded is None:
        if fingerprint is not None:
            warnings.warn(
                f"load_state_dict: this checkpoint (sample {position} of epoch {epoch}) names no dataset version, "
                f"so nothing can tell whether incremental_to_mds changed the dataset (now version {fingerprint}) "
                f"since it was taken; if it did, this epoch's remaining samples are not the ones it would have "
                f"yielded.",
                stacklevel=3,
            )
        return obj
    old = recorded.get("fingerprint") if isinstance(recorded, dict) else None
    old_size = recorded.get("epoch_size") if isinstance(recorded, dict) else None
    if not isinstance(old, str) or not isinstance(old_size, numbers.Integral):
        raise ValueError(
            f"load_state_dict: the checkpoint's {VERSION_KEY!r} must be {{'fingerprint': str, 'epoch_size': int}}, "
            f"got {recorded!r}."
        )
    if old == fingerprint:
        return obj
    following = epoch + 1 if isinstance(epoch, numbers.Integral) else "that epoch + 1"
    now = "a dataset no incremental run keeps" if fingerprint is None else f"version {fingerprint}"
    if position >= old_size:
        warnings.warn(
            f"load_state_dict: the checkpoint finished epoch {epoch} on dataset version {old}; the dataset is now "
            f"{now}, so epoch {epoch} ends here and the next epoch reads the new version.",
            stacklevel=3,
        )
        rest = {key: value for key, value in obj.items() if key != VERSION_KEY}
        return {**rest, "sample_in_epoch": int(epoch_size), **version_entry(fingerprint, epoch_size)}
    raise ValueError(
        f"load_state_dict: this checkpoint was taken at sample {position} of epoch {epoch} on dataset version {old}, "
        f"and the dataset is now {now} (incremental_to_mds changed its shards since). Its position counts samples "
        f"of the old version's order, so resuming mid-epoch would silently skip or repeat samples. Resume on the "
        f"version the checkpoint was taken on, or from the start of an epoch: load it with 'sample_in_epoch' set "
        f"to 0 (epoch {epoch} again, on the new version) or with 'epoch' {following} and 'sample_in_epoch' 0 "
        f"(the next epoch)."
    )
