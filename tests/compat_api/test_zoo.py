"""Upstream's dataset zoo (`streaming.text`, `streaming.vision`, `streaming.multimodal`) over tiny datasets written
in upstream's sample layout: each item, by index and by iteration, is what upstream's class returns."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from streaming import MDSWriter
from streaming._extras import require


def _write(path: str, columns: dict[str, str], samples: list[dict]) -> str:
    with MDSWriter(out=path, columns=columns, size_limit=1 << 12) as writer:
        for sample in samples:
            writer.write(sample)
    return path


def _image(seed: int, mode: str = "RGB") -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (6, 5, 3), np.uint8)
    return Image.fromarray(pixels).convert(mode)


# Our StreamingDataset needs the batch size to place samples; one canonical node keeps tiny datasets whole.
ORDER = {"batch_size": 2, "num_canonical_nodes": 1}


def _both_ways(ds) -> list:
    """Every item by index, checked equal to the same item by iteration (no shuffle: same order)."""
    by_index = [ds[i] for i in range(len(ds))]
    return by_index, list(ds)


# ------------------------------------------------------------------------------------------------------------ text

TEXTS = ["hello world", "mds streams hello", "world world world world world world world", "zzz unknown"]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A WordLevel tokenizer built here (no hub download), saved as a directory AutoTokenizer loads."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[EOS]": 1, "hello": 2, "world": 3, "mds": 4, "streams": 5}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    path = str(tmp_path_factory.mktemp("tokenizer"))
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", eos_token="[EOS]").save_pretrained(path)
    return path


@pytest.mark.parametrize("class_name", ["StreamingC4", "StreamingPile"])
def test_text_datasets_tokenize_truncate_and_pad(tmp_path, tokenizer_dir, class_name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    import streaming.text

    local = _write(str(tmp_path / "ds"), {"text": "str", "url": "str"}, [{"text": t, "url": "u"} for t in TEXTS])
    cls = getattr(streaming.text, class_name)
    ds = cls(local=local, tokenizer_name=tokenizer_dir, max_seq_len=5, group_method="truncate", **ORDER)
    assert ds.tokenizer.pad_token == "[EOS]"  # the tokenizer has no pad token: it pads with end-of-sequence
    reference = AutoTokenizer.from_pretrained(tokenizer_dir)
    reference.pad_token = reference.eos_token
    by_index, by_iteration = _both_ways(ds)
    for item, again, text in zip(by_index, by_iteration, TEXTS):
        expected = reference(text, truncation=True, padding="max_length", max_length=5)
        assert dict(item) == dict(again) == dict(expected)
        assert len(item["input_ids"]) == 5
    assert by_index[0]["input_ids"] == [2, 3, 1, 1, 1] and by_index[0]["attention_mask"] == [1, 1, 0, 0, 0]
    refused = {"StreamingC4": "group_method='concat' must be one of", "StreamingPile": 'Only group_method="truncate"'}
    with pytest.raises(ValueError, match=refused[class_name]):
        cls(local=local, tokenizer_name=tokenizer_dir, max_seq_len=5, group_method="concat")


def test_enwiki_builds_masked_lm_labels(tmp_path):
    from streaming.text import StreamingEnWiki

    rng = np.random.default_rng(0)
    samples = []
    for length in (8, 12):
        positions = np.sort(rng.choice(length, 3, replace=False)).astype(np.int32)
        arrays = {
            "input_ids": rng.integers(0, 1000, length).astype(np.int32),
            "input_mask": np.ones(length, np.int32),
            "segment_ids": (np.arange(length) >= length // 2).astype(np.int32),
            "masked_lm_positions": positions,
            "masked_lm_ids": rng.integers(0, 1000, 3).astype(np.int32),
            "masked_lm_weights": np.ones(3, np.float32),
            "next_sentence_labels": np.array([1], np.int32),
        }
        samples.append(arrays)
    local = _write(
        str(tmp_path / "ds"),
        dict.fromkeys(samples[0], "bytes"),
        [{k: v.tobytes() for k, v in s.items()} for s in samples],
    )
    by_index, by_iteration = _both_ways(StreamingEnWiki(local=local, **ORDER))
    for item, again, stored in zip(by_index, by_iteration, samples):
        labels = np.full(len(stored["input_ids"]), -100)
        labels[stored["masked_lm_positions"]] = stored["masked_lm_ids"]
        assert set(item) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
        for got in (item, again):
            assert got["input_ids"].tolist() == stored["input_ids"].tolist()
            assert got["token_type_ids"].tolist() == stored["segment_ids"].tolist()
            assert got["attention_mask"].tolist() == stored["input_mask"].tolist()
            assert got["labels"].tolist() == labels.tolist()
        assert item["input_ids"].flags.writeable  # copies, as upstream: the model may write into them


# ---------------------------------------------------------------------------------------------------------- vision


@pytest.mark.parametrize("class_name", ["StreamingCIFAR10", "StreamingImageNet"])
def test_classification_datasets_apply_transforms(tmp_path, class_name):
    import streaming.vision

    images = [_image(i) for i in range(5)]
    local = _write(str(tmp_path / "ds"), {"x": "pil", "y": "int"}, [{"x": im, "y": i} for i, im in enumerate(images)])
    cls = getattr(streaming.vision, class_name)
    ds = cls(local=local, **ORDER, transform=np.asarray, target_transform=lambda y: y * 10)
    by_index, by_iteration = _both_ways(ds)
    for (x, y), (x2, y2), image, label in zip(by_index, by_iteration, images, range(5)):
        assert np.array_equal(x, np.asarray(image)) and np.array_equal(x2, x) and y == y2 == label * 10
    joint = cls(local=local, **ORDER, transforms=lambda x, y: (x.size, -y))
    assert joint[3] == ((5, 6), -3)
    with pytest.raises(ValueError, match="Only transforms or transform/target_transform"):
        cls(local=local, batch_size=2, transforms=lambda x, y: (x, y), transform=np.asarray)


def test_vision_default_to_tensor_needs_torchvision_and_says_how_to_install_it(tmp_path):
    from streaming.vision import StreamingCIFAR10

    local = _write(str(tmp_path / "ds"), {"x": "pil", "y": "int"}, [{"x": _image(0), "y": 1}])
    ds = StreamingCIFAR10(local=local, **ORDER)
    try:
        import torchvision.transforms.functional as functional
    except ImportError:
        with pytest.raises(ImportError, match=r'pip install (-e )?"[^"]+\[vision\]"'):
            ds[0]
    else:
        x, y = ds[0]
        assert x.tolist() == functional.to_tensor(_image(0)).tolist() and y == 1


def test_ade20k_applies_joint_then_separate_transforms(tmp_path):
    from streaming.vision import StreamingADE20K

    pairs = [(_image(i), _image(100 + i, "L")) for i in range(3)]
    local = _write(str(tmp_path / "ds"), {"x": "jpeg", "y": "png"}, [{"x": x, "y": y} for x, y in pairs])
    plain = StreamingADE20K(local=local, **ORDER)
    x, y = plain[1]
    assert x.format == "JPEG" and y.format == "PNG" and np.array_equal(np.asarray(y), np.asarray(pairs[1][1]))
    calls = []

    def joint(pair):
        calls.append("joint")
        return pair[1], pair[0]  # swap: the separate transforms then see the swapped pair

    ds = StreamingADE20K(
        local=local,
        **ORDER,
        joint_transform=joint,
        transform=lambda x: ("x", x.mode),
        target_transform=lambda y: ("y", y.mode),
    )
    by_index, by_iteration = _both_ways(ds)
    assert by_index == by_iteration == [(("x", "L"), ("y", "RGB"))] * 3 and calls == ["joint"] * 6


def test_coco_returns_upstreams_tuple(tmp_path):
    from streaming.vision import StreamingCOCO

    samples = [
        {
            "img": _image(i, "L"),
            "img_id": 40 + i,
            "htot": 480,
            "wtot": 640 + i,
            "bbox_sizes": np.arange(8, dtype=np.float32).reshape(2, 4) + i,
            "bbox_labels": np.array([3, 7 + i], np.int64),
        }
        for i in range(3)
    ]
    columns = {
        "img": "jpeg",
        "img_id": "int",
        "htot": "int",
        "wtot": "int",
        "bbox_sizes": "ndarray:float32",
        "bbox_labels": "ndarray:int64",
    }
    local = _write(str(tmp_path / "ds"), columns, samples)
    img, img_id, size, sizes, labels = StreamingCOCO(local=local, **ORDER)[2]
    assert img.mode == "RGB" and img_id == 42 and size == (480, 642)
    assert sizes.tolist() == samples[2]["bbox_sizes"].tolist() and labels.tolist() == [3, 9]

    def transform(img, size, sizes, labels):
        return img.size, (size[0] // 2, size[1] // 2), sizes.sum(), labels[::-1]

    by_index, by_iteration = _both_ways(StreamingCOCO(local=local, **ORDER, transform=transform))
    for item, again, sample in zip(by_index, by_iteration, samples):
        assert item[:3] == again[:3] == ((5, 6), sample["img_id"], (240, sample["wtot"] // 2))
        assert item[3] == sample["bbox_sizes"].sum() and item[4].tolist() == sample["bbox_labels"][::-1].tolist()


# ------------------------------------------------------------------------------------------------------ multimodal


def test_inside_webvid_returns_stored_samples(tmp_path):
    from streaming.multimodal import StreamingInsideWebVid

    samples = [{"content": bytes([i]) * 10, "caption": f"clip {i}"} for i in range(4)]
    local = _write(str(tmp_path / "ds"), {"content": "bytes", "caption": "str"}, samples)
    by_index, by_iteration = _both_ways(StreamingInsideWebVid(local=local, **ORDER))
    assert by_index == by_iteration == samples


@pytest.mark.parametrize("class_name", ["StreamingOutsideGIWebVid", "StreamingOutsideDTWebVid"])
def test_outside_webvid_fetches_each_video_once_into_extra_local(tmp_path, class_name):
    import streaming.multimodal

    extra_remote, extra_local = tmp_path / "videos", tmp_path / "video-cache"
    samples = []
    for i in range(6):
        rel = f"part{i % 2}/clip{i}.mp4"
        (extra_remote / rel).parent.mkdir(parents=True, exist_ok=True)
        (extra_remote / rel).write_bytes(b"video" + bytes([i]) * 50)
        samples.append({"content_path": rel, "caption": f"clip {i}"})
    local = _write(str(tmp_path / "ds"), {"content_path": "str", "caption": "str"}, samples)
    cls = getattr(streaming.multimodal, class_name)
    ds = cls(local=local, extra_local=str(extra_local), extra_remote=str(extra_remote), predownload=2, **ORDER)
    for item, sample in zip(list(ds), samples):
        assert item == {**sample, "content": (extra_remote / sample["content_path"]).read_bytes()}
    assert sorted(os.listdir(extra_local / "part1")) == ["clip1.mp4", "clip3.mp4", "clip5.mp4"]
    (extra_remote / samples[4]["content_path"]).unlink()  # cached now: no second fetch is needed
    assert ds[4]["content"] == b"video" + bytes([4]) * 50
    without = cls(local=local, **ORDER)
    assert without[0] == samples[0]  # no extra location: the stored sample as is


# ----------------------------------------------------------------------------------------------------------- extras


def test_a_missing_extra_names_the_install_command():
    with pytest.raises(
        ImportError, match=r'StreamingC4 needs \'no_such_tokenizer_lib\'.*pip install (-e )?"[^"]+\[text\]"'
    ):
        require("no_such_tokenizer_lib", "text", "StreamingC4")


def test_importing_the_zoo_packages_loads_nothing_heavy():
    import subprocess
    import sys

    script = (
        "import sys, streaming.text, streaming.vision, streaming.multimodal\n"
        "print([m for m in ('torch', 'transformers', 'torchvision') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
