"""End-to-end tests of MDSWriter and StreamingDataset against every remote scheme on its loopback server."""
