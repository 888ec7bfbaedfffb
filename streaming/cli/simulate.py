"""`simulate [URL]`: plan a training run: downloads per node, cache needed, time to first batch, stalls.

Plays one epoch of the real epoch plan (`streaming.dataset.batching.generate_work`, as `StreamingDataset`
builds it) for a dataset (its index, read from any URL) or for synthetic shards (`--shards`, `--shard-samples`,
`--shard-bytes`), a topology, the dataset settings, a per-node bandwidth and a step time; the timing model and
its assumptions are in `streaming.cli.training_model`. Prints a summary and, with `--out DIR`, writes
`summary.txt`, `summary.json`, `throughput.png`, `downloads.png`, `cache.png` and one self-contained
`report.html` (charts need matplotlib, from the `cli` extra).
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import os
from typing import Any

from streaming._extras import require
from streaming.cli.console import OK, UsageError, dataset_folder, emit, human_bytes, table

EXAMPLES = """\
examples:
  mds-streaming simulate s3://bucket/ds --nodes 2 --devices 8 --workers 8 --batch-size 32 \\
      --bandwidth 500mb --step-time 0.25 --shuffle --out /tmp/plan
  mds-streaming simulate --shards 4000 --shard-samples 2000 --shard-bytes 64mb --nodes 4 --devices 8 \\
      --batch-size 16 --bandwidth 1gb --step-time 0.1 --shuffle --shuffle-algo py1e --json
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "simulate",
        parents=[common],
        help="simulate an epoch: downloads per node, minimum cache_limit, time to first batch, stalls",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", nargs="?", help="dataset root (any URL); or describe shards with --shards ...")
    synthetic = parser.add_argument_group("synthetic dataset (instead of URL)")
    synthetic.add_argument("--shards", type=int, help="number of shards")
    synthetic.add_argument("--shard-samples", type=int, help="samples per shard")
    synthetic.add_argument("--shard-bytes", help="bytes per shard, e.g. 64mb")
    topology = parser.add_argument_group("topology")
    topology.add_argument("--nodes", type=int, default=1)
    topology.add_argument("--devices", type=int, default=1, help="ranks (GPUs) per node")
    topology.add_argument("--workers", type=int, default=1, help="DataLoader workers per rank")
    plan = parser.add_argument_group("StreamingDataset settings")
    plan.add_argument("--batch-size", type=int, required=True, help="per-device batch size")
    plan.add_argument("--shuffle", action="store_true")
    plan.add_argument("--shuffle-algo", default="py1e")
    plan.add_argument("--shuffle-seed", type=int, default=9176)
    plan.add_argument("--shuffle-block-size", type=int)
    plan.add_argument("--num-canonical-nodes", type=int)
    plan.add_argument("--partition-algo", default="relaxed")
    plan.add_argument("--batching-method", default="random")
    plan.add_argument("--sampling-method", default="balanced")
    plan.add_argument("--epoch-size", type=int)
    plan.add_argument("--predownload", type=int, help="samples per worker (default 8 batches)")
    plan.add_argument("--epoch", type=int, default=0)
    machine = parser.add_argument_group("machine")
    machine.add_argument("--bandwidth", default="100mb", help="download bytes per second per node, e.g. 500mb")
    machine.add_argument("--latency", type=float, default=0.0, help="seconds before each download's first byte")
    machine.add_argument("--step-time", type=float, default=0.1, help="seconds per training step")
    machine.add_argument("--prefetch-factor", type=int, default=2, help="DataLoader batches per worker in flight")
    machine.add_argument(
        "--per-sample-reads",
        action="store_true",
        help="workers read one sample at a time (a custom collate_fn, or a dataset overriding __getitem__)",
    )
    machine.add_argument("--batch-read-us", type=float, default=60.0, help="a worker's CPU µs per batch (batch reads)")
    machine.add_argument("--row-read-us", type=float, default=0.3, help="a worker's CPU µs per sample (batch reads)")
    machine.add_argument(
        "--sample-read-us", type=float, default=6.0, help="a worker's CPU µs per sample (per-sample reads)"
    )
    parser.add_argument("--out", help="folder for summary.txt/json, PNG charts and report.html")
    parser.set_defaults(run=run)


def _shards(args: argparse.Namespace) -> Any:
    from streaming.cli.training_model import Shards
    from streaming.util import bytes_to_int

    if args.url:
        from streaming.format.index import INDEX_BASENAME, read_index
        from streaming.storage.dataset_root import DatasetRoot

        location = DatasetRoot(dataset_folder(args.url, "simulate"))
        return Shards.from_index(read_index(location), location.size(INDEX_BASENAME) or 0)
    if not (args.shards and args.shard_samples and args.shard_bytes):
        raise UsageError("give a dataset URL, or --shards, --shard-samples and --shard-bytes together.")
    return Shards.uniform(args.shards, args.shard_samples, bytes_to_int(args.shard_bytes))


def settings_from(args: argparse.Namespace) -> Any:
    from streaming.cli.training_model import Settings
    from streaming.util import bytes_to_int

    return Settings(
        nodes=args.nodes,
        ranks_per_node=args.devices,
        workers_per_rank=args.workers,
        batch_size=args.batch_size,
        shuffle=args.shuffle,
        shuffle_algo=args.shuffle_algo,
        shuffle_seed=args.shuffle_seed,
        shuffle_block_size=args.shuffle_block_size,
        num_canonical_nodes=args.num_canonical_nodes,
        partition_algo=args.partition_algo,
        batching_method=args.batching_method,
        sampling_method=args.sampling_method,
        epoch_size=args.epoch_size,
        predownload=args.predownload,
        prefetch_factor=args.prefetch_factor,
        bandwidth=float(bytes_to_int(args.bandwidth)),
        latency=args.latency,
        step_time=args.step_time,
        epoch=args.epoch,
        batch_reads=not args.per_sample_reads,
        batch_read_time=args.batch_read_us * 1e-6,
        row_read_time=args.row_read_us * 1e-6,
        sample_read_time=args.sample_read_us * 1e-6,
    )


def no_stall_cache_limit(summary: dict[str, Any]) -> int:
    """The smallest ``cache_limit`` that never stalls: the run's peak, but never under the dataset's floor."""
    return max(summary["min_cache_limit_bytes"], summary["cache_limit_floor_bytes"])


def summary_text(summary: dict[str, Any], settings: Any) -> str:
    rows = [
        [
            "topology",
            f"{settings.nodes} node(s) x {settings.ranks_per_node} rank(s) x {settings.workers_per_rank} worker(s)",
        ],
        # A prediction is only as good as what it assumed: print the inputs the user may have left at defaults.
        ["assumed per node", f"{human_bytes(settings.bandwidth)}/s download, {settings.step_time:g} s per step"],
        ["steps / samples", f"{summary['steps']} / {summary['samples']}"],
        # The first batch waits for its shards (and the index) to download; the stalls below are the later steps'.
        ["time to first batch", f"{summary['time_to_first_batch_s']:.3f} s (waiting for its shards to download)"],
        ["epoch time", f"{summary['epoch_time_s']:.2f} s"],
        ["throughput", f"{summary['throughput_samples_per_s']} samples/s"],
        [
            "later steps slowed by downloads",
            f"{summary['stalled_steps']} ({summary['stall_time_s']:.2f} s waiting, after the first batch)",
        ],
        [
            "of which waiting for workers' reads",
            f"{summary['steps_waiting_for_reads']} ({'batch' if settings.batch_reads else 'per-sample'} reads)",
        ],
        ["smallest cache_limit without a stall", human_bytes(no_stall_cache_limit(summary))],
        ["shuffle quality", f"{summary['shuffle_quality']:.3f} (0: one shard per batch, 1: as mixed as random)"],
    ]
    per_node = [
        [node, human_bytes(size), count]
        for node, (size, count) in enumerate(
            zip(summary["bytes_downloaded_per_node"], summary["shards_downloaded_per_node"])
        )
    ]
    return table(rows, ["", "predicted"]) + "\n\n" + table(per_node, ["node", "downloaded", "shards"])


def charts(result: Any, settings: Any) -> dict[str, bytes]:
    """PNG charts: throughput over the run, cumulative downloads per node, cache held per node."""
    import matplotlib.pyplot as plt

    images = {name: _png(figure) for name, figure in figures(result, settings).items()}
    plt.close("all")
    return images


def figures(result: Any, settings: Any) -> dict[str, Any]:
    """The charts' matplotlib figures, by file name."""
    matplotlib = require("matplotlib", "cli", "simulate's charts")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    images = {}
    ends = result.step_start + settings.step_time
    first = result.time_to_first_batch
    figure, axis = plt.subplots(figsize=(7, 3.2))
    window = max(1, len(ends) // 50)
    done = np.cumsum(result.step_samples)
    rate = (done[window:] - done[:-window]) / np.maximum(ends[window:] - ends[:-window], 1e-9)
    # Nothing is trained before the first batch: the line starts at zero, and so do both axes, so that a steady
    # run looks steady and a slow start is seen for what it is.
    axis.plot([0.0, first, first, *ends[window:]], [0.0, 0.0, *rate[:1], *rate], color="tab:blue")
    axis.axvline(first, color="gray", linestyle=":", label=f"first batch, {first:.2f} s")
    axis.set(xlabel="seconds", ylabel="samples / s", title="Throughput over the run")
    axis.set_xlim(left=0)
    axis.set_ylim(bottom=0, top=max(float(rate.max(initial=0)), 1.0) * 1.1)
    _legend_outside(axis)
    images["throughput.png"] = figure
    figure, axis = plt.subplots(figsize=(7, 3.2))
    for node, (times, sizes) in enumerate(result.downloads):
        axis.step([0.0, *times], [0.0, *np.cumsum(sizes) / 1e6], where="post", label=f"node {node}", **_style(node))
    axis.axvline(first, color="gray", linestyle=":", label="first batch")
    axis.set(xlabel="seconds", ylabel="MB downloaded", title="Cumulative downloads per node")
    axis.set_xlim(left=0)
    axis.set_ylim(bottom=0)
    _legend_outside(axis)
    images["downloads.png"] = figure
    figure, axis = plt.subplots(figsize=(7, 3.2))
    for node, (times, held) in enumerate(result.cache_curve):
        axis.step(times, held / 1e6, where="post", label=f"node {node}", **_style(node))
    # The run's peak, not the summary's cache_limit (which is at least 4 shards): labelled so the two are not confused.
    axis.axhline(result.min_cache_limit / 1e6, color="gray", linestyle="--", label="peak cache held, any node")
    axis.set(xlabel="seconds", ylabel="MB in cache", title="Cache needed per node (no eviction stall)")
    axis.set_xlim(left=0)
    axis.set_ylim(bottom=0)
    _legend_outside(axis)
    images["cache.png"] = figure
    return images


#: Line styles by node, widest first: nodes that download alike draw one line over another, and each stays visible.
_STYLES = [("-", 3.0), ("--", 2.2), ("-.", 1.6), (":", 1.2)]


def _style(node: int) -> dict[str, Any]:
    linestyle, width = _STYLES[node % len(_STYLES)]
    return {"linestyle": linestyle, "linewidth": width, "alpha": 0.85}


def _legend_outside(axis: Any) -> None:
    """The legend to the right of the plot, where it hides no line."""
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small")


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return buffer.getvalue()


def report_html(text: str, summary: dict[str, Any], images: dict[str, bytes]) -> str:
    """One HTML file with the summary and the charts embedded (no external files)."""
    pictures = "\n".join(
        f'<img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
        for name, data in images.items()
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>mds-streaming simulate</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}img{display:block;margin:1em 0}</style>"
        f"</head><body><h1>Simulated epoch</h1><pre>{html.escape(text)}</pre>{pictures}"
        f"<details><summary>JSON</summary><pre>{html.escape(json.dumps(summary, indent=2))}</pre></details>"
        "</body></html>"
    )


def run(args: argparse.Namespace) -> int:
    from streaming.cli.console import progress
    from streaming.cli.training_model import epoch_plan, simulate

    for name in ("nodes", "devices", "workers", "batch_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1.")
    settings = settings_from(args)
    shards = _shards(args)
    work = epoch_plan(shards, settings)
    with progress(args, total=work.shape[2] * work.shape[3], unit="steps", desc="simulate") as bar:
        result = simulate(shards, settings, progress=bar.update, work=work)
    summary = result.summary()
    text = summary_text(summary, settings)
    if args.out:
        images = charts(result, settings)
        os.makedirs(args.out, exist_ok=True)
        for name, data in images.items():
            with open(os.path.join(args.out, name), "wb") as stream:
                stream.write(data)
        with open(os.path.join(args.out, "summary.txt"), "w") as stream:
            stream.write(text + "\n")
        with open(os.path.join(args.out, "summary.json"), "w") as stream:
            json.dump(summary, stream, indent=2)
        with open(os.path.join(args.out, "report.html"), "w") as stream:
            stream.write(report_html(text, summary, images))
        summary["files"] = sorted(os.listdir(args.out))
        text += f"\n\nwrote {', '.join(summary['files'])} to {args.out}"
    emit(args, summary, text)
    return OK
