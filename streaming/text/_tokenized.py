"""`TokenizedTextDataset`: the shared body of upstream's C4 and Pile datasets (text samples, tokenized on read)."""

from __future__ import annotations

from typing import Any

from streaming._extras import require
from streaming.dataset.dataset import StreamingDataset

_GROUP_METHODS = ("truncate",)


def check_group_method(group_method: str) -> None:
    """Refuse a grouping other than ``truncate`` before anything is loaded."""
    if group_method not in _GROUP_METHODS:
        raise ValueError(f"group_method='{group_method}' must be one of {set(_GROUP_METHODS)}.")


class TokenizedTextDataset(StreamingDataset):
    """Samples ``{"text": str, ...}`` tokenized with a Hugging Face tokenizer into its ``BatchEncoding``.

    ``group_method="truncate"``: every sample is truncated and padded to ``max_seq_len`` tokens. The tokenizer is
    ``transformers.AutoTokenizer.from_pretrained(tokenizer_name)`` (a hub name or a local directory); one without a
    padding token pads with its end-of-sequence token.
    """

    def _set_up_tokenizer(self, tokenizer_name: str, max_seq_len: int, group_method: str) -> None:
        self.tokenizer_name = tokenizer_name
        self.max_seq_len = max_seq_len
        self.group_method = group_method
        transformers = require("transformers", "text", type(self).__name__)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_name)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def _tokenize(self, text_sample: dict[str, Any]) -> Any:
        return self.tokenizer(text_sample["text"], truncation=True, padding="max_length", max_length=self.max_seq_len)

    def get_item(self, idx: int, retry: int = 7) -> Any:
        sample = super().get_item(idx, retry)
        return self._tokenize(sample)
