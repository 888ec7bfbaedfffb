"""Errors of the dataset layer whose types must be upstream's as well as ours."""


class UnknownAlgorithmError(ValueError, KeyError):
    """An unknown ``shuffle_algo`` or ``partition_algo``: a ValueError, and the KeyError of upstream's table lookup
    (which code written against upstream catches)."""

    # KeyError would show the message quoted, as a key.
    __str__ = ValueError.__str__


class PlanMemoryError(MemoryError):
    """An epoch plan that would need more memory than the machine has (an index declaring impossibly many
    samples, or an epoch_size far beyond the data): refused before anything is allocated."""


class InvalidCheckpointError(ValueError, KeyError):
    """A checkpoint ``load_state_dict`` refuses (`streaming.dataset.checkpoint_values`): a ValueError, and the
    KeyError upstream raises at the next epoch for a checkpoint that lacks a key."""

    __str__ = ValueError.__str__
