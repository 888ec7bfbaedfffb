"""Spark: convert DataFrames and Delta tables to MDS shards with a commit protocol."""
