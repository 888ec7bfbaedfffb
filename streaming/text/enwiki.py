"""`StreamingEnWiki`: English Wikipedia pre-tokenized for masked language modelling (upstream's dataset)."""

from __future__ import annotations

from typing import Any

import numpy as np

from streaming.dataset.dataset import StreamingDataset

__all__ = ["StreamingEnWiki"]

# The stored columns (each the raw bytes of a 1-d array) and their dtypes.
FIELD_DTYPES = {
    "input_ids": np.int32,
    "input_mask": np.int32,
    "attention_mask": np.int32,
    "segment_ids": np.int32,
    "token_type_ids": np.int32,
    "masked_lm_positions": np.int32,
    "masked_lm_ids": np.int32,
    "masked_lm_weights": np.float32,
    "next_sentence_labels": np.int32,
    "labels": np.int32,
}


class StreamingEnWiki(StreamingDataset):
    """English Wikipedia for BERT-style pretraining.

    Each item is ``{"input_ids", "token_type_ids", "attention_mask", "labels"}``: the stored ``input_ids``,
    ``segment_ids`` and ``input_mask``, and labels that are -100 except at ``masked_lm_positions``, where they are
    ``masked_lm_ids``.

    Args:
        remote, local, …, shuffle_block_size: as for :class:`~streaming.StreamingDataset` (upstream's defaults).
    """

    def __init__(
        self,
        *,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        download_retry: int = 2,
        download_timeout: float = 60,
        validate_hash: str | None = None,
        keep_zip: bool = False,
        epoch_size: int | None = None,
        predownload: int | None = None,
        cache_limit: int | None = None,
        partition_algo: str = "orig",
        num_canonical_nodes: int | None = None,
        batch_size: int | None = None,
        shuffle: bool = False,
        shuffle_algo: str = "py1s",
        shuffle_seed: int = 9176,
        shuffle_block_size: int = 1 << 18,
    ) -> None:
        super().__init__(
            remote=remote,
            local=local,
            split=split,
            download_retry=download_retry,
            download_timeout=download_timeout,
            validate_hash=validate_hash,
            keep_zip=keep_zip,
            epoch_size=epoch_size,
            predownload=predownload,
            cache_limit=cache_limit,
            partition_algo=partition_algo,
            num_canonical_nodes=num_canonical_nodes,
            batch_size=batch_size,
            shuffle=shuffle,
            shuffle_algo=shuffle_algo,
            shuffle_seed=shuffle_seed,
            shuffle_block_size=shuffle_block_size,
        )
        self.field_dtypes = dict(FIELD_DTYPES)

    def get_item(self, idx: int, retry: int = 7) -> dict[str, Any]:
        sample = super().get_item(idx, retry)
        arrays = {key: np.frombuffer(value, self.field_dtypes[key]) for key, value in sample.items()}
        labels = np.full((len(arrays["input_ids"]),), -100)
        labels[arrays["masked_lm_positions"]] = arrays["masked_lm_ids"]
        return {
            "input_ids": arrays["input_ids"].copy(),
            "token_type_ids": arrays["segment_ids"].copy(),
            "attention_mask": arrays["input_mask"].copy(),
            "labels": labels,
        }
