"""Two cluster nodes writing one dataset on a Unity Catalog volume: two FUSE mounts of one folder.

Each mount (`tests.volume_fuse.mounted_fuse_volumes`) is a node: a file it writes is visible to the other only once
closed, ``O_CREAT | O_EXCL`` is exclusive among its own processes only, and a rename is a copy and a delete. A stand-in
Files API (`tests/servers/fake_databricks.py`) serves the same folder, as the workspace serves the volume the mounts
show. Writers on both nodes race for the same commit versions: every commit must land exactly once, which holds
because commit files under a mounted ``/Volumes`` path are created through the Files API's create-only upload
(`streaming.storage.registry.exclusive_storage_for`), while the mount's ``O_EXCL`` lets both nodes "create" one name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.format.commit_log import commit_path, commit_versions, read_snapshot
from streaming.storage.dataset_root import DatasetRoot
from tests.services import DATABRICKS_TOKEN, SERVERS, Service, _http_answers, free_port, start_service
from tests.volume_fuse import FuseVolume, mounted_fuse_volumes

REPO = Path(__file__).resolve().parents[2]
COMMITS = 12
#: How long a closed file takes to reach object storage on the mounts: what makes O_EXCL races visible.
UPLOAD_DELAY = 0.05


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[FuseVolume]]:
    yield from mounted_fuse_volumes(tmp_path_factory.mktemp("two-nodes"), mounts=2, upload_delay=UPLOAD_DELAY)


@pytest.fixture(scope="module")
def workspace(nodes: list[FuseVolume], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A Files API whose volumes ``<catalog>.default.vol`` (one per mount's path) are the mounts' backing folder."""
    workdir = tmp_path_factory.mktemp("two-nodes-api")
    root = workdir / "root"
    for node in nodes:
        (root / "Volumes" / node.catalog / "default").mkdir(parents=True)
        (root / "Volumes" / node.catalog / "default" / "vol").symlink_to(node.backing, target_is_directory=True)
    port = free_port()
    argv = [sys.executable, str(SERVERS / "fake_databricks.py"), str(port), str(root), DATABRICKS_TOKEN]
    for node in nodes:
        argv += ["--volume", f"{node.catalog}.default.vol"]
    service = start_service(
        "fake-databricks-two-nodes",
        argv,
        port,
        workdir,
        lambda: _http_answers(f"http://127.0.0.1:{port}/.well-known/databricks-config"),
    )
    yield service
    service.stop()


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from streaming.format import commit_log
    from streaming.storage.dataset_root import DatasetRoot

    root, name, count, start = DatasetRoot(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    while time.time() < start:
        time.sleep(0.001)
    for number in range(count):
        basename = f"{name}-{number}.mds"
        shard = {"format": "mds", "version": 2, "samples": 1, "column_names": ["id"], "column_encodings": ["int64"],
                 "column_sizes": [8], "compression": None, "hashes": [], "size_limit": 1 << 26, "zip_data": None,
                 "raw_data": {"basename": basename, "bytes": 20, "hashes": {}}}
        state = commit_log.commit(root, commit_log.APPEND, [shard], base=commit_log.read_snapshot(root))
        print(json.dumps({"version": state.version, "shard": basename}), flush=True)
    """
)


def _race(paths: list[str], env: dict[str, str]) -> list[dict]:
    """One writer process per node, started together; what each says it committed."""
    start = time.time() + 3
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, path, f"node{number}", str(COMMITS), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        for number, path in enumerate(paths)
    ]
    claimed = []
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err[-3000:]
        claimed += [json.loads(line) for line in out.splitlines()]
    return claimed


def _node_env(workspace: Service | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DATABRICKS_")}
    env["PYTHONPATH"] = str(REPO)
    if workspace is not None:
        env.update(DATABRICKS_HOST=workspace.endpoint, DATABRICKS_TOKEN=DATABRICKS_TOKEN)
    return env


def test_a_file_is_seen_by_the_other_node_once_closed_and_o_excl_holds_on_one_node_only(nodes):
    first, second = nodes
    folder = "visibility"
    (first.backing / folder).mkdir()
    with open(f"{first.root}/{folder}/a.txt", "wb") as file:
        file.write(b"being written")
        file.flush()
        assert os.path.exists(f"{first.root}/{folder}/a.txt"), "the writing node sees its own file"
        assert not os.path.exists(f"{second.root}/{folder}/a.txt"), "the other node does not, until it is closed"
    time.sleep(UPLOAD_DELAY)
    assert open(f"{second.root}/{folder}/a.txt", "rb").read() == b"being written"
    handles = [os.open(f"{node.root}/{folder}/b.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL) for node in nodes]
    for number, handle in enumerate(handles):  # both nodes "created" it: O_EXCL is a single node's promise
        os.write(handle, f"node{number}".encode())
        os.close(handle)
    assert (first.backing / folder / "b.txt").read_bytes() == b"node1", "the last node to close wins"
    with pytest.raises(FileExistsError):
        os.open(f"{first.root}/{folder}/b.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.replace(f"{second.root}/{folder}/a.txt", f"{second.root}/{folder}/c.txt")
    assert sorted(os.listdir(first.backing / folder)) == ["b.txt", "c.txt"]


def test_commits_from_two_nodes_all_land_exactly_once(nodes, workspace):
    dataset = "race"
    (nodes[0].backing / dataset).mkdir()
    claimed = _race([f"{node.root}/{dataset}" for node in nodes], _node_env(workspace))
    versions = [entry["version"] for entry in claimed]
    assert len(set(versions)) == len(versions) == 2 * COMMITS, f"two writers claimed one version: {sorted(versions)}"
    backing = DatasetRoot(str(nodes[0].backing / dataset))
    assert commit_versions(backing) == list(range(1, 2 * COMMITS + 1))
    for entry in claimed:
        body = json.loads(backing.read_text(commit_path(entry["version"])) or "")
        assert [shard["raw_data"]["basename"] for shard in body["add"]] == [entry["shard"]]
    final = [shard["raw_data"]["basename"] for shard in read_snapshot(backing).shards]
    assert sorted(final) == sorted(entry["shard"] for entry in claimed)
