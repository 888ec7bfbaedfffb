"""Shard formats: MDS, JSON and CSV/TSV/XSV writers and readers, encodings, compression, hashing, index."""

from streaming.format.index import FileInfo, get_index_basename
from streaming.format.json.reader import JSONReader
from streaming.format.json.writer import JSONWriter
from streaming.format.mds.reader import MDSReader
from streaming.format.mds.writer import MDSWriter
from streaming.format.reader import Reader
from streaming.format.reader_registry import READERS as _readers  # noqa: F401 - upstream's private name, kept importable
from streaming.format.reader_registry import reader_from_json
from streaming.format.xsv.reader import CSVReader, TSVReader, XSVReader
from streaming.format.xsv.writer import CSVWriter, TSVWriter, XSVWriter

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
]
