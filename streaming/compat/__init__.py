"""Code that exists only for MosaicML Streaming's API: the names upstream exports that this package's own design
does not use.

Upstream's named shared-memory blocks, barrier and prefix search (`shared_memory`, `shared_barrier`,
`shm_prefix`, `shm_cleanup`, `coordination_names`), its sample-to-shard `spanner`, its `distributed` helpers, its
downloader and uploader classes (`cloud_downloaders`, `cloud_uploaders`, `destination_checks`) and its Spark
converter's signature (`spark_converter`) live here, each built on this package's own layers. `streaming.base`
re-exports them at upstream's import paths. Nothing in `storage`, `format`, `dataset`, `spark` or `convert`
imports from here (tests/compat_api/test_layers.py checks it), so the core stays free of them.
"""
