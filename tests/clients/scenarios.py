"""The grid the real-clients lane runs on both packages: which data, which loader settings, which topology.

Plain data only, shared by the driver (run inside each side virtualenv by file path) and the pytest module that
compares the two sides' dumps, so the two can never disagree on what a scenario is.

Datasets (written in each side's own work folder by ``client_driver.py``, compared byte for byte first):
``json_concat``/``json_text`` come from llm-foundry's ``convert_dataset_json`` (tokens concatenated to 32, zstd;
raw text), ``txt_1``/``txt_4`` from ``convert_text_to_mds`` with one and four processes (four shard groups merged
by llm-foundry), ``ft_tokenized``/``ft_raw``/``ft_chat``/``ft_uploaded`` from ``convert_finetuning_dataset``
(tokenized turns; raw prompt/response; raw chat messages; written to a local copy and "uploaded" to a second
folder). The converters write one shard of each; ``tokens_sharded``, ``text_sharded``, ``ft_sharded`` and
``vectors`` are written with the side's own ``MDSWriter`` in small shards, as users' pipelines do, so that shuffles,
canonical nodes and workers have shards to move.
"""

from __future__ import annotations

from typing import Any

#: Every converter run of the prepare phase, by output name (the driver owns how each is called).
CONVERTED = ["json_concat", "json_text", "txt_1", "txt_4", "ft_tokenized", "ft_raw", "ft_chat", "ft_uploaded"]
#: Datasets the driver writes with the package's own MDSWriter.
WRITTEN = ["tokens_sharded", "text_sharded", "ft_sharded", "vectors"]

#: The shuffles streaming-community 0.14.2 has (``py1b`` is gone from it: ``unknown-shuffle-algo`` asks for it).
ALGOS = ["py1e", "py1s", "py1br", "py2s", "naive"]

# A text scenario: ``data`` names a dataset above (or ``streams`` names several, each with its Stream arguments),
# ``dataset`` is merged into llm-foundry's ``dataset`` config, ``remote`` streams the data into a fresh local cache
# instead of reading it in place, ``workers`` is the DataLoader's, ``world``/``local_world`` emulate ranks (one
# process per rank, all at once, as the reference joins them in a torch.distributed group; each emulated node
# has its own cache).
TEXT: dict[str, dict[str, Any]] = {
    "plain-in-order": {"data": "tokens_sharded", "dataset": {"shuffle": False}},
    **{
        f"shuffle-{algo}": {"data": "tokens_sharded", "dataset": {"shuffle": True, "shuffle_algo": algo}}
        for algo in ALGOS
    },
    "py1e-4-canonical-nodes-2-workers": {
        "data": "tokens_sharded",
        "dataset": {"shuffle": True, "num_canonical_nodes": 4, "shuffle_block_size": 60},
        "workers": 2,
    },
    "py1s-3-canonical-nodes-3-workers": {
        "data": "tokens_sharded",
        "dataset": {"shuffle": True, "shuffle_algo": "py1s", "num_canonical_nodes": 3, "shuffle_seed": 11},
        "workers": 3,
    },
    "remote-to-local-py1br": {
        "data": "tokens_sharded",
        "remote": True,
        "dataset": {"shuffle": True, "shuffle_algo": "py1br", "predownload": 16},
        "workers": 2,
    },
    "remote-to-local-cache-limit": {
        "data": "tokens_sharded",
        "remote": True,
        "dataset": {"shuffle": True, "cache_limit": "12kb"},
        "workers": 1,
    },
    "text-tokenized-on-the-fly": {"data": "text_sharded", "dataset": {"shuffle": True}, "workers": 2},
    "converted-json-concat": {"data": "json_concat", "dataset": {"shuffle": True}},
    "converted-json-text": {"data": "json_text", "dataset": {"shuffle": False}},
    "converted-text-4-processes": {"data": "txt_4", "remote": True, "dataset": {"shuffle": True}, "workers": 2},
    "unknown-shuffle-algo": {"data": "tokens_sharded", "dataset": {"shuffle": True, "shuffle_algo": "py1b"}},
    # Issue 36: in order, the removed name is never looked up, so both read the data.
    "unknown-shuffle-algo-in-order": {"data": "tokens_sharded", "dataset": {"shuffle": False, "shuffle_algo": "py1b"}},
    "sequence-ids-from-eos": {"data": "tokens_sharded", "dataset": {"shuffle": True, "eos_token_id": 2}},
    "streams-proportions": {
        "streams": {"a": {"data": "tokens_sharded", "proportion": 0.7}, "b": {"data": "txt_4", "proportion": 0.3}},
        "dataset": {"shuffle": True, "epoch_size": 300},
        "workers": 2,
    },
    "streams-repeat-choose-stratified": {
        "streams": {"a": {"data": "tokens_sharded", "repeat": 1.5}, "b": {"data": "txt_1", "choose": 60}},
        "dataset": {"shuffle": True, "shuffle_algo": "py1br", "batching_method": "stratified"},
        "remote": True,
    },
    "streams-per-stream-batching": {
        "streams": {"a": {"data": "tokens_sharded"}, "b": {"data": "txt_4"}},
        "dataset": {"shuffle": True, "batching_method": "per_stream"},
    },
    "two-ranks-one-node": {
        "data": "tokens_sharded",
        "remote": True,
        "dataset": {"shuffle": True, "num_canonical_nodes": 2},
        "workers": 1,
        "world": 2,
        "local_world": 2,
    },
    "two-nodes-two-ranks-each": {
        "data": "tokens_sharded",
        "remote": True,
        "dataset": {"shuffle": True, "shuffle_algo": "py1s", "num_canonical_nodes": 4},
        "world": 4,
        "local_world": 2,
    },
}

# Finetuning scenarios, the same keys; ``dataset`` is merged into llm-foundry's finetuning ``dataset`` config.
FINETUNING: dict[str, dict[str, Any]] = {
    "tokenized-turns": {"data": "ft_tokenized", "remote": True, "dataset": {"shuffle": True}},
    "tokenized-turns-in-order-2-workers": {
        "data": "ft_tokenized",
        "remote": True,
        "dataset": {"shuffle": False},
        "workers": 2,
    },
    "raw-prompt-response-converted": {
        "data": "ft_raw",
        "remote": True,
        "dataset": {"shuffle": True, "shuffle_algo": "py1s", "num_canonical_nodes": 2},
    },
    "raw-prompt-response-sharded": {
        "data": "ft_sharded",
        "remote": True,
        "dataset": {"shuffle": True, "target_prompts": "all", "target_responses": "all"},
        "workers": 2,
    },
    "raw-chat-messages": {"data": "ft_chat", "remote": True, "dataset": {"shuffle": True}, "workers": 1},
    "uploaded-by-the-writer": {"data": "ft_uploaded", "remote": True, "dataset": {"shuffle": True}},
    "streams": {
        "streams": {"a": {"data": "ft_tokenized", "proportion": 0.5}, "b": {"data": "ft_sharded", "proportion": 0.5}},
        "dataset": {"shuffle": True, "epoch_size": 120},
        "remote": True,
    },
    "packed": {"data": "ft_sharded", "remote": True, "dataset": {"shuffle": True, "packing_ratio": 2.0}},
    "two-ranks-one-node": {
        "data": "ft_sharded",
        "remote": True,
        "dataset": {"shuffle": True, "num_canonical_nodes": 2},
        "world": 2,
        "local_world": 2,
    },
}

# Composer-style resumption: the scenario's loader stops after ``stop_after`` batches, its dataset's
# ``state_dict(num_samples, from_beginning=True)`` is taken as composer takes it, and a new loader in a new
# interpreter, of either package, loads it and reads the rest of the epoch.
RESUMPTION: dict[str, dict[str, Any]] = {
    "text-py1e": {"kind": "text", "scenario": "shuffle-py1e", "stop_after": 7},
    "text-py1s-3-workers": {"kind": "text", "scenario": "py1s-3-canonical-nodes-3-workers", "stop_after": 5},
    "text-streams": {"kind": "text", "scenario": "streams-proportions", "stop_after": 9},
    "finetuning-packed": {"kind": "finetuning", "scenario": "packed", "stop_after": 3},
    "finetuning-raw": {"kind": "finetuning", "scenario": "raw-prompt-response-sharded", "stop_after": 4},
}

#: Composer's Trainer over a StreamingDataset: batches to train, where the checkpoint is taken, where it resumes to
#: (past the end of the first epoch: the dataset has 80 samples, 10 batches).
TRAINER = {"batch_size": 8, "checkpoint_at": 5, "resume_to": 14}

#: The ``increments/`` folders of the kept dataset's first run and of the mirror run that changes it.
KEPT_FOLDERS = ("increments/v00000001-0a1b2c3d", "increments/v00000002-4e5f6a7b")

TEXT_BATCH = 8
FINETUNING_BATCH = 4
MAX_SEQ_LEN = 32
FINETUNING_MAX_SEQ_LEN = 64
SIDES = ("ref", "ours")
