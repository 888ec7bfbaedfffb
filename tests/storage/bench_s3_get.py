"""Benchmark (not collected by pytest): `get()` of 100 x 1 MB objects from a loopback SeaweedFS.

Compares the libraries on the same job (stream one object into a local file): boto3 `get_object` and s3fs
`get_file`; then `storage_for("s3://...").get`, which adds the temp name, fdatasync, size check and
rename. Sequential and on 8 threads. Run from the repository root:
`.venv/bin/python -m tests.storage.bench_s3_get`.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

OBJECTS = 100
SIZE = 1 << 20


class _TempPaths:
    def __init__(self, base: str) -> None:
        self.base = Path(base)

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=name, dir=self.base))


def _timed(label: str, fetch: Callable[[int], None], threads: int) -> None:
    fetch(0)  # warm the connection pool
    started = time.perf_counter()
    if threads == 1:
        for number in range(OBJECTS):
            fetch(number)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(fetch, range(OBJECTS)))
    elapsed = time.perf_counter() - started
    print(
        f"{label:<34} threads={threads}: {elapsed:5.2f} s  {OBJECTS / elapsed:6.0f} objects/s  "
        f"{OBJECTS * SIZE / elapsed / 1e6:6.0f} MB/s"
    )


def main() -> None:
    from tests.services import seaweedfs

    with tempfile.TemporaryDirectory() as scratch:
        server_fixture = seaweedfs.__wrapped__(_TempPaths(scratch))
        server = next(server_fixture)
        try:
            os.environ.update(
                AWS_ACCESS_KEY_ID=server.extra["key"],
                AWS_SECRET_ACCESS_KEY=server.extra["secret"],
                AWS_DEFAULT_REGION="us-east-1",
                S3_ENDPOINT_URL=server.endpoint,
            )
            from streaming.storage import storage_for

            storage = storage_for("s3://bench/")
            storage._call("create_bucket", Bucket="bench")
            source = Path(scratch) / "object.bin"
            source.write_bytes(os.urandom(SIZE))
            for number in range(OBJECTS):
                storage.put(str(source), f"s3://bench/obj/{number:03d}")
            out = Path(scratch) / "out"

            def ours(number: int) -> None:
                storage.get(f"s3://bench/obj/{number:03d}", str(out / f"ours-{number}"))

            import s3fs

            fs = s3fs.S3FileSystem(
                key=server.extra["key"],
                secret=server.extra["secret"],
                endpoint_url=server.endpoint,
                skip_instance_cache=True,
            )
            out.mkdir()

            def with_s3fs(number: int) -> None:
                fs.get_file(f"bench/obj/{number:03d}", str(out / f"s3fs-{number}"))

            client = storage._clients.get(60.0, False)

            def with_boto3(number: int) -> None:
                response = client.get_object(Bucket="bench", Key=f"obj/{number:03d}")
                with open(out / f"boto3-{number}", "wb") as sink:
                    for chunk in response["Body"].iter_chunks(1 << 20):
                        sink.write(chunk)

            for threads in (1, 8):
                _timed("boto3 get_object -> file", with_boto3, threads)
                _timed("s3fs get_file", with_s3fs, threads)
                _timed("storage_for(...).get (atomic)", ours, threads)
        finally:
            try:
                next(server_fixture)
            except StopIteration:
                pass


if __name__ == "__main__":
    main()
