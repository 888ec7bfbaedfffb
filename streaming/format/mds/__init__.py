"""The MDS shard format: packed binary columns, one file per shard."""
