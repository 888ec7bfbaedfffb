"""`distinct` against numpy's own `np.unique`, on generated arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays, integer_dtypes

from streaming.format.distinct import distinct


@given(arrays(integer_dtypes(endianness="="), st.integers(0, 200), elements=st.integers(-50, 50)))
def test_distinct_is_np_unique(values):
    expected = np.unique(values)
    found = distinct(values)
    assert found.dtype == expected.dtype
    assert np.array_equal(found, expected)
