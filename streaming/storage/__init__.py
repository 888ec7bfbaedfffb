"""Storage: one backend per URL scheme behind one small interface, plus the shard uploader and downloader."""
