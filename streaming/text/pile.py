"""`StreamingPile`: the Pile as MDS shards of ``{"text": str}`` samples, tokenized on read (upstream's dataset)."""

from __future__ import annotations

from streaming.text._tokenized import TokenizedTextDataset

__all__ = ["StreamingPile"]


class StreamingPile(TokenizedTextDataset):
    """The Pile, streamed and tokenized: each item is the tokenizer's ``BatchEncoding`` of ``text``.

    Args:
        tokenizer_name: a Hugging Face tokenizer (hub name or local directory), loaded with ``AutoTokenizer``.
        max_seq_len: tokens per sample (truncated and padded to it).
        group_method: ``"truncate"`` (the only one).
        remote, local, …, shuffle_block_size: as for :class:`~streaming.StreamingDataset` (upstream's defaults).

    Raises:
        ImportError: ``transformers`` is missing (install ``mds-streaming[text]``).
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
        tokenizer_name: str,
        max_seq_len: int,
        group_method: str,
    ) -> None:
        if group_method != "truncate":
            raise ValueError(f'Only group_method="truncate" is supported at this time (got {group_method!r}).')
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
        self._set_up_tokenizer(tokenizer_name, max_seq_len, group_method)
