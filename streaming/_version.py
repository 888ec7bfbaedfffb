"""The package version, kept in one place for pyproject and `streaming.__version__`."""

__version__ = "0.1.0"
