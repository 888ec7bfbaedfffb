"""NULL-mask column pairs (``streaming.format.mds.nulls``) read back as None; anything else is left alone."""

from __future__ import annotations

from streaming.dataset.local import LocalDataset
from streaming.format import MDSWriter
from streaming.format.mds.nulls import masked_columns


def test_a_mask_pair_folds_into_none_and_disappears(tmp_path):
    columns = {"n": "int32", "n__is_null": "uint8", "s": "str", "s__is_null": "uint8", "plain": "int64"}
    with MDSWriter(out=str(tmp_path), columns=columns) as writer:
        writer.write({"n": 7, "n__is_null": 0, "s": "", "s__is_null": 1, "plain": 1})
        writer.write({"n": 0, "n__is_null": 1, "s": "x", "s__is_null": 0, "plain": 2})
    dataset = LocalDataset(str(tmp_path))
    assert [sorted(sample) for sample in dataset] == [["n", "plain", "s"]] * 2
    assert (dataset[0]["n"], dataset[0]["s"]) == (7, None)
    assert (dataset[1]["n"], dataset[1]["s"]) == (None, "x")


def test_only_uint8_columns_next_to_their_value_column_are_masks():
    names = ["a", "a__is_null", "b__is_null", "c", "c__is_null"]
    assert masked_columns(names, ["int32", "uint8", "uint8", "str", "int8"]) == {"a": "a__is_null"}
