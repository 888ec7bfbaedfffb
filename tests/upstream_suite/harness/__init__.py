"""Our stand-in for the reference's ``tests`` package helpers; laid beside its test modules as ``tests/``."""
