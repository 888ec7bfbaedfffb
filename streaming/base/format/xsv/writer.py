"""Upstream path `streaming.base.format.xsv.writer`: re-exports."""

from streaming.format.xsv.writer import CSVWriter, TSVWriter, XSVWriter

__all__ = ["CSVWriter", "TSVWriter", "XSVWriter"]
