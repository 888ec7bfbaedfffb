"""Upstream path `streaming.base.format.xsv.reader`: re-exports."""

from streaming.format.xsv.reader import CSVReader, TSVReader, XSVReader

__all__ = ["CSVReader", "TSVReader", "XSVReader"]
