"""The documented training loops run without a warning from this package's code paths: each runs in a fresh
interpreter with every warning an error (``python -W error``), as a user who turns warnings on would run it.

Decoded arrays are read-only views of their shard; torch warns ("The given NumPy array is not writable") whenever a
read-only array reaches it, so a path that hands one to torch fails here. Batches read sample by sample (a shard
not local yet, or streams whose columns are encoded differently) take that path; the second test forces it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.pages import REPO, blocks


def run_with_warnings_as_errors(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(cwd)}
    command = [sys.executable, "-W", "error", "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd, env=environment)


@pytest.mark.slow  # three rounds of three pages, about 40 s: the core lane runs it, `make unit` the forced path below
@pytest.mark.parametrize("page", ["docs/guide/resumption.md", "docs/guide/reading.md", "README.md"])
def test_a_documented_loop_warns_of_nothing(page, tmp_path):
    # The page's blocks up to its first loop over a StreamingDataLoader, three times over fresh caches (a batch read
    # sample by sample depends on timing: one round met the warning about half the time before the fix).
    code = ""
    for _, source in blocks(page, "python"):
        code += source
        if "StreamingDataLoader(" in source:
            break
    for round_ in range(3):
        folder = tmp_path / str(round_)
        local = code.replace("s3://bucket/ds", f"{folder}/ds").replace("/tmp/ds", f"{folder}/ds")
        run = run_with_warnings_as_errors(local.replace("/local_disk/", f"{folder}/local/"), tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stderr == ""


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_read_sample_by_sample_warn_of_nothing(tmp_path, workers):
    # Two streams whose `tokens` column is encoded differently cannot be gathered as one batch: their samples are
    # read one by one, as read-only arrays, and collated as torch's default collate does.
    code = f"""
import numpy as np
from streaming import MDSWriter, Stream, StreamingDataLoader, StreamingDataset

for name, encoding in (("fixed", "ndarray:int32:8"), ("free", "ndarray:int32")):
    with MDSWriter(out={str(tmp_path)!r} + "/" + name, columns={{"tokens": encoding, "id": "int64"}}) as writer:
        for i in range(200):
            writer.write({{"tokens": np.full(8, i, np.int32), "id": i}})
streams = [Stream(remote={str(tmp_path)!r} + "/" + name) for name in ("fixed", "free")]
dataset = StreamingDataset(streams=streams, shuffle=True, batch_size=16)
loader = StreamingDataLoader(dataset, batch_size=16, num_workers={workers})
batches = list(loader)
assert sum(len(batch["id"]) for batch in batches) == 400
assert batches[0]["tokens"].shape == (16, 8)
"""
    run = run_with_warnings_as_errors(code, tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
