"""A Delta path with a VARIANT column, read by `dataframe_to_mds` in a session without Delta support (deltalake
reads it, `streaming.spark.table_input`): the same samples as `convert` without Spark."""

from __future__ import annotations

import struct

from streaming.convert.arrow_engine import convert_files
from streaming.spark import dataframe_to_mds
from tests.delta_values.tables import array, metadata, obj, primitive, short, string, variant_table
from tests.spark.helpers import read_samples


def test_a_variant_of_a_delta_path_is_stored_as_the_json_text_either_way(session, tmp_path):
    keys = metadata("b", "a")
    values = [
        obj([(1, array(short("x"), primitive(1))), (0, primitive(7, struct.pack("<d", 1e10)))]),
        primitive(8, bytes([2]) + (150).to_bytes(4, "little", signed=True)),
        primitive(12, struct.pack("<q", 253402300799999999)),
        string('tab\t "quoted" é'),
        None,
    ]
    path = variant_table(tmp_path / "table", [keys, keys, keys, keys, None], values)
    dataframe_to_mds(path, str(tmp_path / "spark"), spark=session, progress=False)
    convert_files(path, str(tmp_path / "arrow"))
    expected = [
        {"a": ["x", True], "b": 1e10},
        1.5,
        "9999-12-31 23:59:59.999999+00:00",
        'tab\t "quoted" é',
        None,
    ]
    for out in ("spark", "arrow"):
        stored = sorted((int(sample["id"]), sample["v"]) for sample in read_samples(str(tmp_path / out)))
        assert [value for _, value in stored] == expected, out
