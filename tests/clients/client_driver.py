"""Run llm-foundry's and composer's data path, unchanged, inside one side virtualenv, and dump what comes out.

Run by tests/clients/test_real_clients.py with a side venv's interpreter, by file path (so that the script's folder,
not the checkout's, heads sys.path: the reference side must not import this checkout's ``streaming``):

    inputs WORK           the tokenizer (a WordLevel ``tokenizers`` model in ``PreTrainedTokenizerFast``, saved to
                          a folder: no hub) and the raw inputs both sides convert, in WORK/inputs
    run WORK SIDE PEER [SDIST]
                          first half: llm-foundry's converters, the side's own MDSWriter, every loader scenario, the
                          first half of each resumption and composer's Trainer up to its checkpoint; then, once
                          PEER (the other side, running at the same time) has finished its first half, the second
                          halves from both sides' states and checkpoints (crossed between the packages); last,
                          the test modules of the llm-foundry sdist unpacked at SDIST

Everything lands in WORK/SIDE: data/ (the datasets), cache/ (remote->local caches), dumps/NAME.pkl (one per
scenario: the batches as numpy arrays, or the error raised). Only llm-foundry's and composer's public entry points
are called, as a training script calls them; nothing of theirs is patched.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import pickle
import random
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import scenarios as grid

# No hub, no telemetry: every model file is local and the lane has no network beyond PyPI.
os.environ.update(
    HF_HUB_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    HF_HUB_DISABLE_TELEMETRY="1",
    TOKENIZERS_PARALLELISM="false",
    WANDB_MODE="disabled",
)

SPECIAL = ["<pad>", "<unk>", "<eos>", "<bos>", "<user>", "<assistant>", "<system>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)


# ---------------------------------------------------------------------------------------------------------- inputs


def make_inputs(work: Path) -> None:
    """A tokenizer and the raw text, prompt/response and chat inputs, all from one seeded generator."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(22)
    words = sorted(
        {
            "".join(rng.choice("bdfgklmnprstvz" if i % 2 == 0 else "aeiou") for i in range(rng.randint(2, 7)))
            for _ in range(400)
        }
    )
    vocab = {token: index for index, token in enumerate(SPECIAL + words)}
    model = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=model, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>", bos_token="<bos>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(work / "tokenizer")
    assert tokenizer.eos_token_id == 2

    def sentence(low: int, high: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))

    inputs = work / "inputs"
    (inputs / "txt").mkdir(parents=True)
    with open(inputs / "text.jsonl", "w") as out:
        for _ in range(400):
            out.write(json.dumps({"text": sentence(5, 40)}) + "\n")
    for index in range(8):
        (inputs / "txt" / f"part-{index}.txt").write_text("\n".join(sentence(5, 30) for _ in range(40)))
    with open(inputs / "ft_pr.jsonl", "w") as out:
        for _ in range(150):
            out.write(json.dumps({"prompt": sentence(3, 25), "response": sentence(2, 20)}) + "\n")
    with open(inputs / "ft_chat.jsonl", "w") as out:
        for _ in range(80):
            turns = []
            for _ in range(rng.randint(1, 2)):
                turns += [
                    {"role": "user", "content": sentence(3, 12)},
                    {"role": "assistant", "content": sentence(2, 10)},
                ]
            out.write(json.dumps({"messages": turns}) + "\n")


# ------------------------------------------------------------------------------------------------------- the data


def convert(work: Path, side: Path) -> None:
    """llm-foundry's converters, each as its command line calls it, into side/data; errors are dumped."""
    from llmfoundry.command_utils import convert_dataset_json, convert_finetuning_dataset, convert_text_to_mds

    tokenizer, inputs, data = str(work / "tokenizer"), work / "inputs", side / "data"
    finetuning = {
        "dataset": "json",
        "data_subset": None,
        "splits": ["train"],
        "preprocessor": None,
        "skip_preprocessing": True,
        "local": None,
        "compression": "zstd",
        # build_dataloader's own default (one per CPU) would add a worker per core for four tiny files.
        "num_workers": 1,
        "tokenizer_kwargs": {},
        "max_seq_len": grid.FINETUNING_MAX_SEQ_LEN,
        "target_prompts": "none",
        "target_responses": "last",
        "encoder_decoder": False,
    }
    text_to_mds = {
        "tokenizer_name": tokenizer,
        "input_folder": str(inputs / "txt"),
        "concat_tokens": grid.MAX_SEQ_LEN,
        "eos_text": "<eos>",
        "bos_text": "",
        "no_wrap": False,
        "compression": "zstd",
        "args_str": "real-clients lane",
        "reprocess": True,
        "trust_remote_code": False,
    }
    json_common = {"path": str(inputs / "text.jsonl"), "split": "train", "tokenizer": tokenizer}
    runs: dict[str, Callable[[], None]] = {
        "json_concat": lambda: convert_dataset_json(
            out_root=str(data / "json_concat"),
            compression="zstd",
            concat_tokens=grid.MAX_SEQ_LEN,
            eos_text="<eos>",
            **json_common,
        ),
        "json_text": lambda: convert_dataset_json(
            out_root=str(data / "json_text"), compression=None, concat_tokens=None, **json_common
        ),
        "txt_1": lambda: convert_text_to_mds(output_folder=str(data / "txt_1"), processes=1, **text_to_mds),
        "txt_4": lambda: convert_text_to_mds(output_folder=str(data / "txt_4"), processes=4, **text_to_mds),
        "ft_tokenized": lambda: convert_finetuning_dataset(
            data_files=[str(inputs / "ft_pr.jsonl")],
            out_root=str(data / "ft_tokenized"),
            tokenizer=tokenizer,
            **finetuning,
        ),
        "ft_raw": lambda: convert_finetuning_dataset(
            data_files=[str(inputs / "ft_pr.jsonl")], out_root=str(data / "ft_raw"), tokenizer=None, **finetuning
        ),
        "ft_chat": lambda: convert_finetuning_dataset(
            data_files=[str(inputs / "ft_chat.jsonl")], out_root=str(data / "ft_chat"), tokenizer=None, **finetuning
        ),
        "ft_uploaded": lambda: convert_finetuning_dataset(
            data_files=[str(inputs / "ft_pr.jsonl")],
            out_root=str(data / "ft_uploaded"),
            tokenizer=tokenizer,
            **{**finetuning, "local": str(data / "ft_uploaded_local")},
        ),
    }
    assert list(runs) == grid.CONVERTED
    for name, run in runs.items():
        record(side, f"convert-{name}", lambda run=run: run() or {"ok": True})


def write(work: Path, side: Path) -> None:
    """The small-shard datasets, written with this side's own ``streaming.MDSWriter``."""
    import numpy as np
    from transformers import AutoTokenizer

    from streaming import MDSWriter

    tokenizer = AutoTokenizer.from_pretrained(work / "tokenizer")
    lines = [json.loads(line)["text"] for line in (work / "inputs" / "text.jsonl").read_text().splitlines()]
    pairs = [json.loads(line) for line in (work / "inputs" / "ft_pr.jsonl").read_text().splitlines()]
    data = side / "data"

    def tokens() -> None:
        ids: list[int] = []
        for line in lines:
            ids += tokenizer(line)["input_ids"] + [tokenizer.eos_token_id]
        with MDSWriter(out=str(data / "tokens_sharded"), columns={"tokens": "ndarray:int32"}, size_limit=1500) as out:
            for start in range(0, len(ids) - grid.MAX_SEQ_LEN + 1, grid.MAX_SEQ_LEN):
                out.write({"tokens": np.asarray(ids[start : start + grid.MAX_SEQ_LEN], np.int32)})

    def text() -> None:
        with MDSWriter(out=str(data / "text_sharded"), columns={"text": "str"}, size_limit=2000) as out:
            for line in lines[:200]:
                out.write({"text": line})

    def prompt_response() -> None:
        columns = {"prompt": "str", "response": "str"}
        with MDSWriter(out=str(data / "ft_sharded"), columns=columns, size_limit=1500, compression="zstd") as out:
            for pair in pairs:
                out.write(pair)

    def vectors() -> None:
        columns = {"x": "ndarray:float32", "y": "int"}
        with MDSWriter(out=str(data / "vectors"), columns=columns, size_limit=600) as out:
            for i in range(80):
                out.write({"x": np.sin(np.arange(4, dtype=np.float32) * (i + 1)), "y": i % 3})

    for name, run in zip(grid.WRITTEN, [tokens, text, prompt_response, vectors]):
        record(side, f"write-{name}", lambda run=run: run() or {"ok": True})
    record(side, "write-kept", lambda: keep_incrementally(data) or {"ok": True})


def keep_incrementally(data: Path) -> None:
    """``kept``: the ``vectors`` shards laid out as ``incremental_to_mds`` lays out its first run (every shard in
    an ``increments/`` folder, the root index naming them there), the shape of dataset whose checkpoints name
    their version. Plain file copies, so each side's is the same bytes whichever package wrote ``vectors``."""
    import shutil

    folder = grid.KEPT_FOLDERS[0]
    (data / "kept" / folder).mkdir(parents=True)
    index = json.loads((data / "vectors" / "index.json").read_text())
    for shard in index["shards"]:
        name = shard["raw_data"]["basename"]
        shutil.copyfile(data / "vectors" / name, data / "kept" / folder / name)
        shard["raw_data"]["basename"] = f"{folder}/{name}"
    (data / "kept" / "index.json").write_text(json.dumps(index, sort_keys=True))


def mirror_kept(data: Path) -> None:
    """What a mirror run that deleted every row of the last shard publishes: an index without that shard (its file
    stays until vacuum, for readers of the version before) and one shard rewritten copy-on-write under the new
    run's folder."""
    import shutil

    index = json.loads((data / "kept" / "index.json").read_text())
    index["shards"].pop()
    first = index["shards"][0]["raw_data"]
    old, new = first["basename"], f"{grid.KEPT_FOLDERS[1]}/rewritten/shard.00000.mds"
    (data / "kept" / new).parent.mkdir(parents=True)
    shutil.copyfile(data / "kept" / old, data / "kept" / new)
    first["basename"] = new
    (data / "kept" / "index.json").write_text(json.dumps(index, sort_keys=True))


def location(side: Path, name: str) -> tuple[str, str | None]:
    """Where a dataset is, and its split: the finetuning converter writes one folder per split."""
    if name in ("ft_tokenized", "ft_raw", "ft_chat", "ft_uploaded"):
        return str(side / "data" / name), "train"
    return str(side / "data" / name), None


# ---------------------------------------------------------------------------------------------------- the loaders


def loader_config(side: Path, kind: str, scenario: Mapping[str, Any], cache: str) -> dict[str, Any]:
    """llm-foundry's ``dataset`` config for a scenario; remote scenarios stream into a fresh cache folder."""
    remote = scenario.get("remote", False)

    def place(name: str, tag: str) -> dict[str, Any]:
        path, split = location(side, name)
        where = {"remote": path, "local": str(side / "cache" / tag)} if remote else {"local": path}
        return {**where, "split": split}

    if kind == "text":
        config: dict[str, Any] = {"max_seq_len": grid.MAX_SEQ_LEN}
    else:
        config = {"max_seq_len": grid.FINETUNING_MAX_SEQ_LEN, "decoder_only_format": True}
    if "streams" in scenario:
        config["streams"] = {
            key: {**place(stream["data"], f"{cache}-{key}"), **{k: v for k, v in stream.items() if k != "data"}}
            for key, stream in scenario["streams"].items()
        }
    else:
        config.update(place(scenario["data"], cache))
    config.update(scenario.get("dataset", {}))
    return config


def build_loader(side: Path, kind: str, scenario: Mapping[str, Any], cache: str, tokenizer: Any) -> Any:
    """The DataLoader llm-foundry's builder returns (``DataSpec.dataloader``)."""
    from llmfoundry.data import build_finetuning_dataloader, build_text_dataloader

    workers = scenario.get("workers", 0)
    loader_args = {
        "num_workers": workers,
        "pin_memory": False,
        "prefetch_factor": 2 if workers else None,
        "persistent_workers": False,
    }
    config = loader_config(side, kind, scenario, cache)
    if kind == "text":
        spec = build_text_dataloader(
            tokenizer=tokenizer, device_batch_size=grid.TEXT_BATCH, dataset=config, drop_last=False, **loader_args
        )
    else:
        spec = build_finetuning_dataloader(
            tokenizer=tokenizer,
            device_batch_size=grid.FINETUNING_BATCH,
            dataset=config,
            drop_last=False,
            **loader_args,
        )
    return spec.dataloader


def read_all(loader: Any, stop_after: int | None = None) -> list[Any]:
    batches = []
    for batch in loader:
        batches.append(to_plain(batch))
        if stop_after is not None and len(batches) == stop_after:
            break
    return batches


def run_scenario(side: Path, kind: str, name: str, scenario: Mapping[str, Any], tokenizer: Any) -> dict[str, Any]:
    """One rank's batches, or every rank's when the scenario emulates several (one process per rank)."""
    world = scenario.get("world", 1)
    if world == 1:
        return {"batches": read_all(build_loader(side, kind, scenario, f"{kind}-{name}", tokenizer))}
    local_world = scenario["local_world"]
    context = multiprocessing.get_context("fork")  # the ranks inherit the imported clients: no second import
    port = _free_port()
    targets = [side / "dumps" / f"{kind}-{name}.rank{rank}.pkl" for rank in range(world)]
    nodes = []
    for node in range(world // local_world):
        ranks = range(node * local_world, (node + 1) * local_world)
        envs = [
            {
                "RANK": rank,
                "WORLD_SIZE": world,
                "LOCAL_RANK": rank % local_world,
                "LOCAL_WORLD_SIZE": local_world,
                "NODE_RANK": node,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
            }
            for rank in ranks
        ]
        jobs = [
            (side, kind, scenario, f"{kind}-{name}-node{node}", tokenizer, env, targets[env["RANK"]]) for env in envs
        ]
        nodes.append(context.Process(target=_node_main, args=(jobs, world > local_world)))
    for node_process in nodes:
        node_process.start()
    for node_process in nodes:
        node_process.join(600)
        if node_process.exitcode != 0:
            raise RuntimeError(f"a node's processes exited with {node_process.exitcode}")
    ranks = [pickle.loads(target.read_bytes()) for target in targets]
    for target in targets:
        target.unlink()
    errors = [rank["error"] for rank in ranks if "error" in rank]
    if errors:
        raise RuntimeError(f"a rank failed: {errors[0]}")
    return {"ranks": [rank["batches"] for rank in ranks]}


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _node_main(jobs: list[tuple], isolate: bool) -> None:
    """One emulated node: its ranks, each in its own process, sharing a /dev/shm of their own when several
    nodes run on this host (real nodes share none; both packages keep their per-node state there)."""
    if isolate:
        _private_dev_shm()
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_rank_main, args=job) for job in jobs]
    for process in processes:
        process.start()
    for process in processes:
        process.join(600)
    sys.exit(max(abs(process.exitcode or 0) for process in processes))


def _private_dev_shm() -> None:
    """Move this process into a mount namespace of its own with a fresh tmpfs on /dev/shm (root, as in CI)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    clone_newns, ms_rec, ms_private = 0x00020000, 1 << 14, 1 << 18
    if libc.unshare(clone_newns) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed: emulating nodes needs root")
    # Private first, so that the tmpfs below is not propagated back to the host's /dev/shm.
    if libc.mount(b"none", b"/", None, ms_rec | ms_private, None) != 0:
        raise OSError(ctypes.get_errno(), "making / a private mount failed")
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mounting a tmpfs on /dev/shm failed")


def _rank_main(side: Path, kind: str, scenario: Mapping[str, Any], cache: str, tokenizer: Any, env: dict, target):
    """One rank, as llm-foundry's train script runs it: composer's process group first, then the loader."""
    import torch
    from composer.utils import dist

    torch.set_num_threads(1)
    os.environ.update({key: str(value) for key, value in env.items()})
    try:
        dist.initialize_dist("cpu")
        result: dict[str, Any] = {"batches": read_all(build_loader(side, kind, scenario, cache, tokenizer))}
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}\n{traceback.format_exc()}"}
    target.write_bytes(pickle.dumps(result))


def scenario_of(kind: str, name: str) -> Mapping[str, Any]:
    return (grid.TEXT if kind == "text" else grid.FINETUNING)[name]


def loaders(work: Path, side: Path) -> None:
    from llmfoundry.utils.builders import build_tokenizer

    tokenizer = build_tokenizer(str(work / "tokenizer"), {})
    for kind, table in (("text", grid.TEXT), ("finetuning", grid.FINETUNING)):
        for name, scenario in table.items():
            record(
                side,
                f"{kind}-{name}",
                lambda kind=kind, name=name, scenario=scenario: run_scenario(side, kind, name, scenario, tokenizer),
            )
    for name, case in grid.RESUMPTION.items():

        def first_half(case: Mapping[str, Any] = case, name: str = name) -> dict[str, Any]:
            kind, scenario = case["kind"], scenario_of(case["kind"], case["scenario"])
            loader = build_loader(side, kind, scenario, f"resume-{name}", tokenizer)
            batches = read_all(loader, stop_after=case["stop_after"])
            batch = grid.TEXT_BATCH if kind == "text" else grid.FINETUNING_BATCH
            # As composer's State._dataset_state_dict: samples seen in this epoch, counted from its beginning.
            state = loader.dataset.state_dict(num_samples=case["stop_after"] * batch, from_beginning=True)
            return {"batches": batches, "state": to_plain(state)}

        record(side, f"resume-{name}", first_half)


def resumed(work: Path, side: Path) -> None:
    from llmfoundry.utils.builders import build_tokenizer

    tokenizer = build_tokenizer(str(work / "tokenizer"), {})
    for name, case in grid.RESUMPTION.items():
        for producer in grid.SIDES:

            def second_half(case: Mapping[str, Any] = case, name: str = name, producer: str = producer) -> dict:
                saved = pickle.loads((work / producer / "dumps" / f"resume-{name}.pkl").read_bytes())
                if "error" in saved:
                    raise RuntimeError(f"no state: {producer}'s first half failed")
                kind, scenario = case["kind"], scenario_of(case["kind"], case["scenario"])
                loader = build_loader(side, kind, scenario, f"resumed-{name}-{producer}", tokenizer)
                loader.dataset.load_state_dict(saved["state"])
                return {"batches": read_all(loader)}

            record(side, f"resumed-{name}-from-{producer}", second_half)


# --------------------------------------------------------------------------------------------------- the Trainer


def trainer_run(
    side: Path, cache: str, max_batches: int, save_folder: Path | None, load_path: str | None, data: str = "vectors"
):
    import numpy as np
    import torch
    from composer import Callback, Trainer
    from composer.models import ComposerClassifier
    from torch.utils.data import DataLoader

    from streaming import StreamingDataset

    class Recorder(Callback):
        def __init__(self) -> None:
            self.batches: list[Any] = []

        def after_dataloader(self, state, logger) -> None:
            self.batches.append(to_plain(state.batch))

    def collate(samples: list[dict[str, Any]]) -> tuple[Any, Any]:
        return torch.from_numpy(np.stack([s["x"] for s in samples])), torch.tensor([int(s["y"]) for s in samples])

    torch.manual_seed(5)
    dataset = StreamingDataset(
        remote=str(side / "data" / data),
        local=str(side / "cache" / cache),
        batch_size=grid.TRAINER["batch_size"],
        shuffle=True,
        shuffle_seed=31,
    )
    loader = DataLoader(dataset, batch_size=grid.TRAINER["batch_size"], collate_fn=collate, num_workers=1)
    recorder = Recorder()
    model = ComposerClassifier(torch.nn.Linear(4, 3), num_classes=3)
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration=f"{max_batches}ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        device="cpu",
        seed=7,
        callbacks=[recorder],
        save_folder=str(save_folder) if save_folder else None,
        save_interval=f"{max_batches}ba",
        save_filename="checkpoint.pt",
        load_path=load_path,
        progress_bar=False,
        log_to_console=False,
        loggers=[],
    )
    trainer.fit()
    weights = {key: value.detach().numpy().copy() for key, value in trainer.state.model.state_dict().items()}
    trainer.close()
    return {"batches": recorder.batches, "weights": weights}


def trainer_first_half(side: Path) -> None:
    record(
        side,
        "trainer-first-half",
        lambda: trainer_run(side, "trainer-first", grid.TRAINER["checkpoint_at"], side / "checkpoint", None),
    )
    record(
        side,
        "trainer-kept-first-half",
        lambda: trainer_run(
            side, "kept-first", grid.TRAINER["checkpoint_at"], side / "kept-checkpoint", None, data="kept"
        ),
    )


def trainer_second_half(work: Path, side: Path) -> None:
    for producer in grid.SIDES:
        checkpoint = work / producer / "checkpoint" / "checkpoint.pt"
        record(
            side,
            f"trainer-resumed-from-{producer}",
            lambda producer=producer, checkpoint=checkpoint: trainer_run(
                side, f"trainer-{producer}", grid.TRAINER["resume_to"], None, str(checkpoint)
            ),
        )
    # A dataset the incremental job keeps: resumed on the version the checkpoint was taken on, then after a mirror
    # run changed it (each side changes its own copy once its own resumes on the old version are done).
    for stage in ("same", "changed"):
        if stage == "changed":
            mirror_kept(side / "data")
        for producer in grid.SIDES:
            checkpoint = work / producer / "kept-checkpoint" / "checkpoint.pt"
            record(
                side,
                f"trainer-kept-{stage}-from-{producer}",
                lambda producer=producer, checkpoint=checkpoint, stage=stage: trainer_run(
                    side, f"kept-{stage}-{producer}", grid.TRAINER["resume_to"], None, str(checkpoint), data="kept"
                ),
            )


# ---------------------------------------------------------------------------------------------------- plumbing


def to_plain(value: Any) -> Any:
    """Tensors and arrays as numpy arrays (dtype kept), containers as dicts and lists: loadable anywhere."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    if isinstance(value, Mapping):
        return {str(key): to_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(item) for item in value]
    return value


def record(side: Path, name: str, run: Callable[[], dict[str, Any]]) -> None:
    """Run one scenario and dump its result, or the error it raised (the other side may raise the same)."""
    started = time.monotonic()
    try:
        result = run()
    except Exception as error:
        result = {
            "error": f"{type(error).__name__}: {error}",
            "error_types": [cls.__name__ for cls in type(error).__mro__],
            "traceback": traceback.format_exc(),
        }
        print(f"[{side.name}] {name}: {result['error']}", file=sys.stderr, flush=True)
    result["seconds"] = round(time.monotonic() - started, 2)
    (side / "dumps" / f"{name}.pkl").write_bytes(pickle.dumps(result))
    gc.collect()  # the reference frees a dataset's shared memory when the object goes


def versions(side: Path) -> None:
    import importlib.metadata

    import composer
    import llmfoundry
    import torch
    import transformers

    import streaming

    found = {
        "llm-foundry": llmfoundry.__version__,
        "composer": composer.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "streaming.__version__": streaming.__version__,
        "streaming.__file__": streaming.__file__,
        "distributions": sorted(
            f"{dist.metadata['Name']}=={dist.version}"
            for dist in importlib.metadata.distributions()
            if dist.metadata["Name"] in ("mds-streaming", "streaming-community", "mosaicml", "llm-foundry")
        ),
    }
    (side / "versions.json").write_text(json.dumps(found, indent=1))


def main() -> None:
    phase, work = sys.argv[1], Path(sys.argv[2])
    if phase == "inputs":
        make_inputs(work)
        return
    if phase != "run":
        raise SystemExit(f"unknown phase {phase!r}")
    import torch

    torch.set_num_threads(1)  # deterministic and fair to the other lanes on two cores
    side, peer = work / sys.argv[3], work / sys.argv[4]
    (side / "dumps").mkdir(parents=True, exist_ok=True)
    os.environ["HF_DATASETS_CACHE"] = str(side / "hf-cache")  # before `datasets` is imported
    versions(side)  # imports both clients and the streaming package
    # The clients' modules stay for the whole run: out of the collector's sight, the collections after each
    # scenario (which release the reference's shared memory) take milliseconds instead of seconds.
    gc.freeze()
    try:
        convert(work, side)
        write(work, side)
        loaders(work, side)
        trainer_first_half(side)
    finally:
        (side / "first-half.done").touch()
    # The second halves read the peer's resumption states and checkpoint as well as this side's own.
    deadline = time.monotonic() + 900
    while not (peer / "first-half.done").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{peer.name} never finished its first half")
        time.sleep(0.5)
    resumed(work, side)
    trainer_second_half(work, side)
    if len(sys.argv) > 5:
        record(side, "llm-foundry-tests", lambda: shipped_tests(side, Path(sys.argv[5])))


def shipped_tests(side: Path, sdist: Path) -> dict[str, Any]:
    """llm-foundry's own test modules from its sdist, in a fresh pytest session of this interpreter (the clients are
    imported already: a second interpreter would spend most of its time importing them again)."""
    import contextlib
    import io
    import shutil

    import pytest

    folder = side / "llm-foundry-tests"
    shutil.copytree(sdist / "tests", folder / "tests")
    shutil.copy(sdist / "pyproject.toml", folder)  # its pytest options and warning filters
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        code = pytest.main(
            ["-q", "-p", "no:cacheprovider", "--color=no", "--rootdir", str(folder), str(folder / "tests")]
        )
    return {"exit_code": int(code), "output": output.getvalue()[-4000:]}


if __name__ == "__main__":
    main()
