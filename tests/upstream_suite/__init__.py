"""Runs streaming-community 0.14.2's own behaviour tests against this package (see run.py)."""
