"""merge_index in both forms on every scheme, with nested sub-folders kept whole (upstream #516)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.format.merge import merge_index
from streaming.storage import storage_for
from streaming.storage.url import join_url

pytestmark = pytest.mark.services

FIXTURES = Path(__file__).parent / "fixtures"
PARTS = {
    "part-a": "mds_zstd_index.json",
    "part-b/train": "json_plain_index.json",
    "part-b/val/2024": "mds_zstd_index.json",
}


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _expected_shards() -> list[dict]:
    shards = []
    for folder, name in sorted(PARTS.items()):
        for shard in _fixture(name)["shards"]:
            for key in ("raw_data", "zip_data", "raw_meta", "zip_meta"):
                if shard.get(key):
                    shard[key]["basename"] = f"{folder}/{shard[key]['basename']}"
            shards.append(shard)
    return shards


def _publish_parts(root: str) -> list[str]:
    urls = []
    for folder, name in sorted(PARTS.items()):
        url = join_url(root, folder, "index.json")
        storage_for(url).put(str(FIXTURES / name), url)
        urls.append(url)
    return urls


def _read_merged(root: str, tmp_path) -> dict:
    target = tmp_path / "merged.json"
    storage_for(root).get(join_url(root, "index.json"), str(target))
    return json.loads(target.read_text())


def test_list_form(remote, tmp_path):
    urls = _publish_parts(remote.root)
    merge_index(urls + [urls[0]], remote.root)  # duplicates are merged once
    merged = _read_merged(remote.root, tmp_path)
    assert merged == {"version": 2, "shards": _expected_shards()}
    assert merged["shards"][16]["raw_meta"]["basename"] == "part-b/train/shard.00000.json.meta"


def test_root_form(remote, tmp_path):
    _publish_parts(remote.root)
    merge_index(remote.root)
    assert _read_merged(remote.root, tmp_path) == {"version": 2, "shards": _expected_shards()}
    merge_index(remote.root, keep_local=True, download_timeout=30)  # the root's own index is not merged in
    assert len(_read_merged(remote.root, tmp_path)["shards"]) == len(_expected_shards())


def test_local_remote_pairs_prefer_the_local_copy(remote_factory, tmp_path):
    s3 = remote_factory("s3")
    local_root = tmp_path / "local"
    pairs = []
    for folder, name in sorted(PARTS.items()):
        local_index = local_root / folder / "index.json"
        local_index.parent.mkdir(parents=True)
        local_index.write_text((FIXTURES / name).read_text())
        pairs.append((str(local_index), join_url(s3.root, folder, "index.json")))  # remote copies never written
    merge_index(pairs, (str(local_root), s3.root), keep_local=False)
    assert _read_merged(s3.root, tmp_path) == {"version": 2, "shards": _expected_shards()}
    assert not local_root.exists(), "keep_local=False removes the local side after the upload"


def test_root_form_pairs_local_and_remote(remote_factory, tmp_path):
    s3 = remote_factory("s3")
    local_root = tmp_path / "local"
    _publish_parts(s3.root)
    only_local = local_root / "part-c" / "index.json"
    only_local.parent.mkdir(parents=True)
    only_local.write_text((FIXTURES / "json_plain_index.json").read_text())
    merge_index((str(local_root), s3.root))
    merged = json.loads((local_root / "index.json").read_text())
    folders = sorted({shard["raw_data"]["basename"].rsplit("/", 1)[0] for shard in merged["shards"]})
    assert folders == ["part-a", "part-b/train", "part-b/val/2024", "part-c"]
    assert merged == _read_merged(s3.root, tmp_path)


def test_local_only(tmp_path):
    root = tmp_path / "out"
    for folder, name in PARTS.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "index.json").write_text((FIXTURES / name).read_text())
    merge_index(str(root), keep_local=False)  # a local-only output is never deleted
    assert json.loads((root / "index.json").read_text()) == {"version": 2, "shards": _expected_shards()}
    merge_index([str(root / folder) for folder in sorted(PARTS)], str(root))  # folders work as well as files
    assert json.loads((root / "index.json").read_text())["shards"] == _expected_shards()


def test_entries_outside_the_root_use_their_folder_name(tmp_path):
    elsewhere = tmp_path / "elsewhere" / "attempt-7"
    elsewhere.mkdir(parents=True)
    (elsewhere / "index.json").write_text((FIXTURES / "json_plain_index.json").read_text())
    merge_index([str(elsewhere / "index.json")], str(tmp_path / "out"))
    merged = json.loads((tmp_path / "out" / "index.json").read_text())
    assert merged["shards"][0]["raw_data"]["basename"] == "attempt-7/shard.00000.json"


def test_a_missing_local_index_is_upstreams_download_error(tmp_path):
    """A local path in the list is fetched like a remote one: missing, it is upstream's RuntimeError, naming it."""
    missing = str(tmp_path / "gone" / "index.json")
    with pytest.raises(RuntimeError, match="Failed to download index.json") as raised:
        merge_index([missing], str(tmp_path / "out"))
    assert missing in str(raised.value) and isinstance(raised.value, FileNotFoundError)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="Invalid arguments to merge_index"):
        merge_index()
    with pytest.raises(ValueError, match="Invalid arguments to merge_index"):
        merge_index(["a/index.json"])
    with pytest.raises(ValueError, match="Invalid arguments to merge_index"):
        merge_index(42, "out")
