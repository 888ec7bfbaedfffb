"""Every store, command and reader whose optional package is missing answers with the extra that installs it.

Each case runs in a fresh process with the packages hidden (`without.py`), the way a user meets it: a store through
its first operation, a command through `mds-streaming`, a reader through its public name. The answer is one sentence
that names the missing package and the ``pip install "<this copy>[<extra>]"`` that adds it, never a bare
``No module named``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming._extras import install_command

REPO = Path(__file__).resolve().parents[2]
WITHOUT = Path(__file__).with_name("without.py")
# A fresh interpreter per case, about 3 s each: the core lane runs them, `make unit` does not.
pytestmark = pytest.mark.slow

#: (hidden packages, the extra that installs them, code that meets them first)
STORES = [
    ("boto3,botocore,awscrt", "s3", "s3://bucket/ds/index.json"),
    ("google", "gcs", "gs://bucket/ds/index.json"),
    ("azure", "azure", "azure://container/ds/index.json"),
    ("oci", "oci", "oci://bucket@namespace/ds/index.json"),
    ("huggingface_hub", "hf", "hf://datasets/org/repo/ds/index.json"),
    ("paramiko", "sftp", "sftp://user@127.0.0.1:1/ds/index.json"),
    ("databricks", "databricks", "dbfs:/Volumes/main/default/vol/ds/index.json"),
    ("databricks", "databricks", "/Volumes/main/default/vol/ds/index.json"),
]

READERS = [
    ("torch", "torch", "from streaming import StreamingDataset"),
    ("torch", "torch", "from streaming import StreamingDataLoader"),
    ("pyspark", "spark", "from streaming.spark import dataframe_to_mds"),
    ("pyspark", "spark", "import streaming.base.converters"),
    (
        "deltalake",
        "delta",
        "from streaming.incremental import incremental_to_mds\nincremental_to_mds('{tmp}/t', '{tmp}/o')",
    ),
    (
        "transformers",
        "text",
        "from streaming.text import StreamingC4\nStreamingC4(tokenizer_name='gpt2', max_seq_len=8, "
        "group_method='truncate', remote='{tmp}/ds', split='train', batch_size=1)",
    ),
    (
        "torchvision",
        "vision",
        "from streaming.vision import StreamingCIFAR10\n"
        "StreamingCIFAR10(remote='{tmp}/ds', split='train', batch_size=1)[0]",
    ),
]

COMMANDS = [
    ("pyarrow", "cli", ["convert", "{tmp}/rows.parquet", "{tmp}/out"]),
    ("matplotlib", "cli", ["simulate", "{tmp}/ds", "--batch-size", "4", "--out", "{tmp}/report"]),
    ("deltalake", "delta", ["incremental", "{tmp}/table", "{tmp}/out"]),
    ("boto3,botocore,awscrt", "s3", ["inspect", "s3://bucket/ds"]),
    ("boto3,botocore,awscrt", "s3", ["verify", "s3://bucket/ds"]),
    ("google", "gcs", ["cp", "{tmp}/ds", "gs://bucket/ds"]),
    ("azure", "azure", ["vacuum", "azure://container/ds", "--dry-run"]),
    ("oci", "oci", ["rebuild-index", "oci://bucket@namespace/ds"]),
    ("databricks", "databricks", ["merge-index", "dbfs:/Volumes/main/default/vol/ds"]),
]


def without(hidden: str, code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that cannot import ``hidden``; no credentials reach any store."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DATABRICKS_HOST": "http://127.0.0.1:9",
        "DATABRICKS_TOKEN": "unused",
        "AZURE_ACCOUNT_NAME": "unused",
        "AZURE_ACCOUNT_ACCESS_KEY": "dW51c2Vk",
    }
    command = [sys.executable, str(WITHOUT), hidden, code, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment, cwd=cwd)


def names_the_extra(output: str, hidden: str, extra: str) -> None:
    packages = [f"'{package}'" for package in hidden.split(",")]
    assert any(package in output for package in packages), output
    assert f"which is not installed. Install it with: {install_command(extra)}" in output, output


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    from PIL import Image

    from streaming import MDSWriter

    with MDSWriter(out=str(tmp_path / "ds"), columns={"x": "int"}) as writer:
        for i in range(8):
            writer.write({"x": i})
    # A split as the dataset zoo reads it (CIFAR-10's columns).
    with MDSWriter(out=str(tmp_path / "ds" / "train"), columns={"x": "pil", "y": "int"}) as writer:
        writer.write({"x": Image.new("RGB", (2, 2)), "y": 0})
    return tmp_path


@pytest.mark.parametrize(("hidden", "extra", "url"), STORES, ids=[url.split(":")[0] or "volumes" for *_, url in STORES])
def test_a_store_without_its_extra(hidden, extra, url, tmp_path):
    code = f"from streaming.storage import storage_for\nstorage_for({url!r}).exists({url!r})"
    run = without(hidden, code, cwd=tmp_path)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    names_the_extra(last, hidden, extra)
    assert url in last or " storage needs " in last


@pytest.mark.parametrize(("hidden", "extra", "url"), STORES[:1], ids=["s3"])
def test_a_dataset_streamed_from_a_store_without_its_extra(hidden, extra, url, tmp_path):
    code = f"from streaming import StreamingDataset\nStreamingDataset(remote={url.rsplit('/', 1)[0]!r}, batch_size=1)"
    run = without(hidden, code, cwd=tmp_path)
    assert run.returncode == 1
    names_the_extra(run.stderr.strip().splitlines()[-1], hidden, extra)


@pytest.mark.parametrize(("hidden", "extra", "code"), READERS, ids=[code.split("\n")[0] for *_, code in READERS])
def test_a_reader_without_its_extra(hidden, extra, code, dataset):
    run = without(hidden, code.format(tmp=dataset), cwd=dataset)
    assert run.returncode == 1
    names_the_extra(run.stderr.strip().splitlines()[-1], hidden, extra)


@pytest.mark.parametrize(("hidden", "extra", "args"), COMMANDS, ids=[" ".join(args[:2]) for *_, args in COMMANDS])
def test_a_command_without_its_extra(hidden, extra, args, dataset):
    (dataset / "rows.parquet").write_bytes(b"PAR1")
    (dataset / "table" / "_delta_log").mkdir(parents=True)
    code = "import sys\nfrom streaming.cli import main\nsys.exit(main(sys.argv[1:]))"
    run = without(hidden, code, *(arg.format(tmp=dataset) for arg in args), cwd=dataset)
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith(f"mds-streaming {args[0]}: error: "), run.stderr
    names_the_extra(run.stderr, hidden, extra)
    assert "Traceback" not in run.stderr
