"""The CSV/TSV/XSV shard formats: delimited text lines plus a binary offsets file per shard."""
