"""Upstream path `streaming.base.format`: re-exports of the shard formats."""

from streaming.format import (
    CSVReader,
    CSVWriter,
    FileInfo,
    JSONReader,
    JSONWriter,
    MDSReader,
    MDSWriter,
    Reader,
    TSVReader,
    TSVWriter,
    XSVReader,
    XSVWriter,
    _readers,
    get_index_basename,
    reader_from_json,
)

__all__ = [
    "CSVWriter",
    "FileInfo",
    "get_index_basename",
    "JSONWriter",
    "MDSWriter",
    "Reader",
    "reader_from_json",
    "TSVWriter",
    "XSVWriter",
    "MDSReader",
    "JSONReader",
    "CSVReader",
    "TSVReader",
    "XSVReader",
    "_readers",
]
