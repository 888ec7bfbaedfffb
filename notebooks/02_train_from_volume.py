# Databricks notebook source
# MAGIC %md
# MAGIC # 2 · Train a PyTorch model from the volume, with checkpoints and mid-epoch resume
# MAGIC
# MAGIC Streams the dataset written by `01_convert_to_mds` with `StreamingDataset` and trains a small classifier:
# MAGIC
# MAGIC 1. in this process: one epoch, saving a checkpoint (model, optimizer, `StreamingDataLoader.state_dict()`)
# MAGIC    halfway through; then a fresh model, dataset and loader resume from the checkpoint, and the notebook
# MAGIC    checks that they see exactly the samples the uninterrupted run saw after the checkpoint, in the same
# MAGIC    order, and end with the same weights;
# MAGIC 2. with `TorchDistributor` (2 processes on the driver, CPU): the same checkpoint and resume check on every
# MAGIC    rank, each reading its own part of every epoch. Set `local_mode=False` and `num_processes` to the number
# MAGIC    of workers to train across the cluster.
# MAGIC
# MAGIC **Widgets**: `data` (the dataset folder; the default matches notebook 1), `cache` (a local folder for
# MAGIC downloaded shards, one per machine), `checkpoints` (where checkpoints go: a volume folder on a cluster),
# MAGIC `batch_size`, `workers` (DataLoader worker processes).

# COMMAND ----------

# What to install (mds-streaming is not on PyPI yet): the wheel `make dist` builds into dist/, copied to a volume
# (default), another wheel or a Git URL (`git+https://<host>/<org>/<repo>.git@<tag>`).
dbutils.widgets.text(
    "install", "/Volumes/main/default/mds_demo/mds_streaming-0.2.0-py3-none-any.whl", "pip requirement of mds-streaming"
)
install = dbutils.widgets.get("install")

# COMMAND ----------

# MAGIC %pip install $install

# COMMAND ----------

dbutils.library.restartPython()

# COMMAND ----------

import importlib.util
import math
import os
import tempfile

import torch
from torch import nn

import streaming
from streaming import StreamingDataLoader, StreamingDataset

if importlib.util.find_spec("streaming.spark") is None:
    raise ImportError(
        f"`streaming` at {streaming.__file__} is MosaicML Streaming, not mds-streaming: run the %pip "
        f"cell above (it shadows the copy Databricks Runtime ML ships) and restart Python."
    )
print(f"mds-streaming {streaming.__mds_version__} from {os.path.dirname(streaming.__file__)}")


# On Databricks, not in a local run that stands in for one (run_local.py sets RUN_LOCAL_ACCESS_MODE): such a run has
# no Unity Catalog, so its demo data stays in a local folder.
ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ and "RUN_LOCAL_ACCESS_MODE" not in os.environ


def default_location(name: str) -> str:
    """A dataset folder in the demo volume on Databricks, in a temporary folder anywhere else."""
    if ON_DATABRICKS:
        return f"/Volumes/main/default/mds_demo/{name}"
    return os.path.join(tempfile.gettempdir(), "mds_demo", name)


dbutils.widgets.text("data", default_location("demo"), "MDS dataset folder")
dbutils.widgets.text("cache", os.path.join(tempfile.gettempdir(), "mds_demo_cache"), "Local shard cache")
dbutils.widgets.text("checkpoints", default_location("checkpoints"), "Checkpoint folder")
dbutils.widgets.text("batch_size", "64", "Batch size (per process)")
dbutils.widgets.text("workers", "0", "DataLoader workers")

data = dbutils.widgets.get("data").strip()
cache = dbutils.widgets.get("cache").strip()
checkpoints = dbutils.widgets.get("checkpoints").strip()
batch_size = int(dbutils.widgets.get("batch_size"))
workers = int(dbutils.widgets.get("workers"))
os.makedirs(checkpoints, exist_ok=True)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Model, loader and one training step
# MAGIC Each sample is `{"id", "features", "label"}`; batches are dicts of tensors. A run is deterministic: the
# MAGIC dataset's shuffle is seeded, and so is the model's initialisation.

# COMMAND ----------


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))


def make_loader(cache_dir: str) -> StreamingDataLoader:
    dataset = StreamingDataset(remote=data, local=cache_dir, batch_size=batch_size, shuffle=True, shuffle_seed=17)
    return StreamingDataLoader(dataset, batch_size=batch_size, num_workers=workers)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict) -> float:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(batch["features"]), batch["label"].long())
    loss.backward()
    optimizer.step()
    return loss.item()


def train_with_checkpoint(model, optimizer, loader, checkpoint_path: str, checkpoint_step: int, save: bool):
    """Train one epoch, saving a checkpoint after `checkpoint_step` batches; return the ids seen after it."""
    seen_after, losses = [], []
    for step, batch in enumerate(loader, start=1):
        losses.append(train_step(model, optimizer, batch))
        if step == checkpoint_step and save:
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "loader": loader.state_dict(),
                    "step": step,
                },
                checkpoint_path,
            )
        elif step > checkpoint_step:
            seen_after.extend(batch["id"].tolist())
    return seen_after, losses


def resume(model, optimizer, loader, checkpoint_path: str):
    """Load a checkpoint into a fresh model, optimizer and loader, and train to the end of the epoch."""
    state = torch.load(checkpoint_path, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    loader.load_state_dict(state["loader"])
    seen = []
    for batch in loader:
        train_step(model, optimizer, batch)
        seen.extend(batch["id"].tolist())
    return seen, state


# COMMAND ----------

# MAGIC %md
# MAGIC ## Single process: checkpoint halfway, then resume from it

# COMMAND ----------

model = make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = make_loader(os.path.join(cache, "single"))
steps = math.ceil(len(loader.dataset) / batch_size)
checkpoint_path = os.path.join(checkpoints, "single.pt")
expected_after, losses = train_with_checkpoint(model, optimizer, loader, checkpoint_path, steps // 2, save=True)
print(
    f"epoch of {steps} steps: loss {losses[0]:.3f} -> {sum(losses[-10:]) / len(losses[-10:]):.3f}; "
    f"checkpoint after step {steps // 2}"
)

fresh_model = make_model()
fresh_optimizer = torch.optim.SGD(fresh_model.parameters(), lr=0.1)
del loader
resumed_after, state = resume(fresh_model, fresh_optimizer, make_loader(os.path.join(cache, "single")), checkpoint_path)
if resumed_after != expected_after:
    raise AssertionError(
        f"resumed run saw {len(resumed_after)} samples starting {resumed_after[:5]}, expected "
        f"{len(expected_after)} starting {expected_after[:5]}"
    )
for name, value in model.state_dict().items():
    if not torch.allclose(value, fresh_model.state_dict()[name]):
        raise AssertionError(f"after resuming, parameter {name} differs from the uninterrupted run")
print(
    f"resumed at sample {state['loader']['sample_in_epoch']} of epoch {state['loader']['epoch']}: the "
    f"{len(resumed_after)} remaining samples came in the same order and the weights match"
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Distributed: `TorchDistributor`
# MAGIC The function below runs in every process; `torchrun` sets the rank and world size that `StreamingDataset`
# MAGIC reads, so each rank gets its own share of every epoch. Rank 0 writes the checkpoint; after it, every rank
# MAGIC resumes from it and checks its samples. Every rank returns the same summary.

# COMMAND ----------


def train_distributed(cache_dir: str, checkpoint_path: str) -> dict:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        model = DistributedDataParallel(make_model())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = make_loader(cache_dir)
        rank_steps = math.ceil(len(loader.dataset) / batch_size)
        expected, losses = train_with_checkpoint(
            model, optimizer, loader, checkpoint_path, rank_steps // 2, save=rank == 0
        )
        dist.barrier()
        del loader
        fresh = DistributedDataParallel(make_model())
        fresh_optimizer = torch.optim.SGD(fresh.parameters(), lr=0.1)
        resumed, state = resume(fresh, fresh_optimizer, make_loader(cache_dir), checkpoint_path)
        per_rank = [None] * world
        dist.all_gather_object(
            per_rank,
            {
                "rank": rank,
                "samples": len(expected),
                "ids": expected,
                "resumed_ok": resumed == expected,
                "final_loss": losses[-1],
            },
        )
    finally:
        dist.destroy_process_group()
    shared = set.intersection(*(set(r["ids"]) for r in per_rank))
    return {
        "world_size": world,
        "steps_per_rank": rank_steps,
        "sample_in_epoch": state["loader"]["sample_in_epoch"],
        "samples_after_checkpoint": [r["samples"] for r in per_rank],
        "ranks_resumed_ok": [r["resumed_ok"] for r in per_rank],
        "ids_seen_by_every_rank": len(shared),
        "final_loss": [round(r["final_loss"], 4) for r in per_rank],
    }


# COMMAND ----------

from pyspark.ml.torch.distributor import TorchDistributor

summary = TorchDistributor(num_processes=2, local_mode=True, use_gpu=False).run(
    train_distributed, os.path.join(cache, "distributed"), os.path.join(checkpoints, "distributed.pt")
)
print(summary)
if not all(summary["ranks_resumed_ok"]):
    raise AssertionError(f"distributed resume did not continue where the checkpoint left off: {summary}")

# COMMAND ----------

import json

dbutils.notebook.exit(
    json.dumps(
        {
            "single_steps": steps,
            "resumed_samples": len(resumed_after),
            "resumed_at": state["loader"]["sample_in_epoch"],
            "distributed": summary,
        }
    )
)
