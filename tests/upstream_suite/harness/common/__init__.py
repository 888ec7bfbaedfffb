"""Helpers the reference's test modules import as ``tests.common``."""
