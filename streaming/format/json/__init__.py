"""The JSON shard format: JSON lines plus a binary offsets file per shard."""
