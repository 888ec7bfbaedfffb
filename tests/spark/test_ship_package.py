"""`ship_package` over a real Spark Connect server whose Python workers lack the package.

The server's workers run a virtualenv of their own (no pip, no system site-packages) that reaches only the compiled
libraries a Databricks runtime or a `%pip install` gives the workers (pyarrow, pandas, numpy and their own
requirements, msgspec, zstandard) through a `.pth` file; neither mds-streaming nor its pure-Python requirement
catalogue is there, and the server's environment has no PYTHONPATH pointing at this checkout. A conversion into a
folder standing for a volume fails with `WorkerImportError` naming the package before the call and succeeds after
it; a classic session, in a driver process of its own (so that its workers inherit no PYTHONPATH), does the same
with `sparkContext.addPyFile`.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.spark import dataframe_to_mds, ship_package
from streaming.spark.worker_python import WorkerImportError
from tests.spark.conftest import ConnectServer
from tests.spark.helpers import read_samples

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
#: What the bare workers get: compiled libraries (and what they import), never the package or catalogue.
WORKER_LIBRARIES = (
    "numpy",
    "pandas",
    "pyarrow",
    "dateutil",
    "pytz",
    "six",
    "msgspec",
    "zstandard",
)
#: Linked too where this interpreter has them: pandas 2 needs tzdata, pandas 1.5 (DBR 14.3's) does not.
WORKER_LIBRARIES_IF_PRESENT = ("tzdata", "typing_extensions")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv's interpreter that sees only `WORKER_LIBRARIES` (linked from this one's site-packages)."""
    root = tmp_path_factory.mktemp("bare-workers")
    venv.create(root / "venv", with_pip=False, system_site_packages=False)
    libraries = root / "libraries"
    libraries.mkdir()
    present = [name for name in WORKER_LIBRARIES_IF_PRESENT if importlib.util.find_spec(name) is not None]
    for name in (*WORKER_LIBRARIES, *present):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (libraries / source.name).symlink_to(source)
        vendored = source.parent / f"{source.name}.libs"  # a wheel's bundled shared libraries (numpy.libs)
        if vendored.is_dir():
            (libraries / vendored.name).symlink_to(vendored)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    ).stdout.strip()
    Path(site, "worker-libraries.pth").write_text(f"{libraries}\n")
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import pyarrow, pandas, msgspec, zstandard, importlib.util as u; "
            "print(u.find_spec('streaming'), u.find_spec('catalogue'))",
        ],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        cwd=root,  # `python -c` looks in its working folder first, as the workers' `-m pyspark.daemon` does
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["None", "None"]
    return python


def bare_environment(python: Path) -> dict[str, str]:
    """This process's environment for Spark, with the bare workers and no path to this checkout."""
    environment = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "PYTHONHOME")}
    environment.update(PYSPARK_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1")
    return environment


@pytest.fixture(scope="module")
def bare_connect_server(tmp_path_factory: pytest.TempPathFactory, bare_python: Path) -> Iterator[ConnectServer]:
    server = ConnectServer(tmp_path_factory.mktemp("bare-connect"), env=bare_environment(bare_python))
    yield server
    server.stop()


def test_ship_package_over_spark_connect(bare_connect_server, tmp_path):
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(bare_connect_server.url).create()
    try:
        frame = session.range(0, 300, 1, 3).selectExpr("id", "sha2(CAST(id AS STRING), 256) AS digest")
        before = tmp_path / "volume" / "before"
        with pytest.raises(WorkerImportError, match="cannot import 'streaming', which dataframe_to_mds's tasks"):
            dataframe_to_mds(frame, str(before), progress=False)
        assert not (before / "index.json").exists()

        name = ship_package(session)
        assert name.startswith("mds_streaming-") and name.endswith(".zip")
        out = tmp_path / "volume" / "after"
        result = dataframe_to_mds(frame, str(out), progress=False)
        assert result.samples == 300
        assert sorted(int(sample["id"]) for sample in read_samples(str(out))) == list(range(300))
        assert ship_package(session) == name  # the same code again: the same artifact, nothing new uploaded
    finally:
        session.stop()


CLASSIC_DRIVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])  # this checkout, for the driver only: the workers inherit no PYTHONPATH
    from pyspark.sql import SparkSession
    from streaming.spark import dataframe_to_mds, ship_package
    from streaming.spark.worker_python import WorkerImportError
    spark = (
        SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate()
    )
    frame = spark.range(0, 50, 1, 2)
    try:
        dataframe_to_mds(frame, sys.argv[2] + "/before", progress=False)
    except WorkerImportError as err:
        print("before:", err)
    print("shipped:", ship_package(spark))
    print("after:", dataframe_to_mds(frame, sys.argv[2] + "/after", progress=False).samples)
""")


def test_ship_package_on_a_classic_session(bare_python, tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", CLASSIC_DRIVER, str(REPO), str(tmp_path)],
        capture_output=True,
        text=True,
        env=bare_environment(bare_python),
        timeout=300,
        cwd=tmp_path,  # the workers start in the driver's working folder, and look there first
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("before: Spark's Python workers cannot import 'streaming'"), run.stdout
    assert lines[1].startswith("shipped: mds_streaming-") and lines[2] == "after: 50"
    assert read_samples(str(tmp_path / "after"))[0]["id"] == 0


def test_the_archive_holds_the_package_and_is_named_by_its_contents(tmp_path):
    import zipfile

    from streaming.spark.ship import build_archive

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = build_archive(str(tmp_path / "a"))
    again = build_archive(str(tmp_path / "b"))
    assert os.path.basename(first) == os.path.basename(again)
    assert Path(first).read_bytes() == Path(again).read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert "streaming/__init__.py" in names and "streaming/spark/task.py" in names
    assert "catalogue/__init__.py" in names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
