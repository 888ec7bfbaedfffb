"""Version numbers, kept in one place for pyproject and `streaming.__version__`.

Two numbers, on purpose. ``DISTRIBUTION_VERSION`` is this package's own release (the ``mds-streaming``
distribution on PyPI, `importlib.metadata.version("mds-streaming")`, ``streaming.__mds_version__``).
``__version__`` is the MosaicML Streaming release whose API, formats and sample orders this package
reproduces: code written against upstream compares ``streaming.__version__`` with upstream's release numbers
(``>= 0.7`` for a feature, say), and a drop-in must pass those checks as the release it stands in for does.
"""

#: The MosaicML Streaming (streaming-community) release this package is a drop-in replacement for.
__version__ = "0.14.2"

#: This package's own release.
DISTRIBUTION_VERSION = "0.2.0"
