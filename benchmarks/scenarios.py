"""The scenario catalogue: what each scenario runs (child phases), on what data, what it reports.

A scenario has untimed `prep` steps (run once per run, by the reference interpreter, shared between
scenarios), then per round and side its `steps` (the last one is measured; earlier ones are per-side
setup), and the `metrics` read from the measured step's result. Most also have a `physical` step: what
the machine does on the same bytes without a dataset library, measured in the same rounds. Scenarios
of the "later" group are gated: they run by default only once the project exposes every name in `requires`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

# Samples per schema at BENCH_SCALE=1 (write and read the same amount).
SAMPLES = {"tokens": 20_000, "text": 40_000, "jpeg": 30_000}
COMPRESSIONS = (None, "zstd")
MIN_SAMPLES = 500
STARTUP_SHARDS = 100_000
RESUME_SAMPLES = 10_000
SPARK_ROWS = 1_000_000


@dataclass(frozen=True)
class Step:
    """One child phase with its keyword arguments."""

    phase: str
    args: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.phase}:{json.dumps(self.args, sort_keys=True)}"


@dataclass(frozen=True)
class Metric:
    """A figure read from the measured step's result. goal: 'higher', 'lower' or 'info'."""

    key: str
    label: str
    goal: str


@dataclass(frozen=True)
class Scenario:
    name: str
    group: str
    steps: tuple[Step, ...]
    metrics: tuple[Metric, ...]
    prep: tuple[Step, ...] = ()
    requires: tuple[str, ...] = ()
    max_rounds: int | None = None
    # The physical reference measured beside both sides each round (phase_limits.py, or ours in-process for the
    # DataLoader), reporting some of the same metric keys; None where the scenario has no such bar.
    physical: Step | None = None
    physical_label: str = ""

    @property
    def gated(self) -> bool:
        return self.group == "later"


THROUGHPUT = Metric("samples_per_s", "samples/s", "higher")
MMAP_ITER = "mmap + frombuffer per sample"


def _count_label(count: int) -> str:
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}m"
    return f"{count // 1000}k" if count >= 1000 else str(count)


def _n(schema: str, scale: float) -> int:
    return max(MIN_SAMPLES, int(SAMPLES[schema] * scale))


def _dataset_prep(schema: str, n: int, out: str, **writer_args) -> tuple[Step, ...]:
    return (
        Step("inputs", {"schema": schema, "n": n}),
        Step("dataset", {"schema": schema, "n": n, "out": out, **writer_args}),
    )


def _formats(scale: float) -> list[Scenario]:
    found = []
    for schema in SAMPLES:
        n = _n(schema, scale)
        for compression in COMPRESSIONS:
            limit = "limit_zstd" if compression else "limit_write"
            found.append(
                Scenario(
                    f"write-{schema}-{compression or 'none'}",
                    "formats",
                    (Step("write", {"schema": schema, "n": n, "compression": compression}),),
                    (
                        THROUGHPUT,
                        Metric("payload_mb_per_s", "payload MB/s", "higher"),
                        Metric("out_mb", "output MB", "info"),
                    ),
                    # The physical bar reads the uncompressed shards of the same samples.
                    prep=_dataset_prep(schema, n, f"ds-{schema}"),
                    physical=Step(limit, {"schema": schema, "n": n, "dataset": f"ds-{schema}"}),
                    physical_label="zstd -3 on all cores, same shards" if compression else "same shard bytes to files",
                )
            )
    for schema in SAMPLES:
        n = _n(schema, scale)
        read = {"schema": schema, "n": n, "dataset": f"ds-{schema}"}
        prep = _dataset_prep(schema, n, f"ds-{schema}")
        found.append(
            Scenario(
                f"local-seq-{schema}",
                "formats",
                (Step("local_seq", read),),
                (THROUGHPUT, Metric("construct_s", "construct s", "lower")),
                prep=prep,
                physical=Step("limit_iter", read),
                physical_label=MMAP_ITER,
            )
        )
        # ds[i] on LocalDataset and on StreamingDataset, against the same bare lookup.
        for name, phase in (("local-random", "local_random"), ("sd-random", "sd_random")):
            found.append(
                Scenario(
                    f"{name}-{schema}",
                    "formats",
                    (Step(phase, read),),
                    (Metric("p50_us", "ds[i] p50 us", "lower"), Metric("p99_us", "ds[i] p99 us", "lower")),
                    prep=prep,
                    physical=Step("limit_random", read),
                    physical_label="mmap lookup: shard search, 2 offsets, decode",
                )
            )
        found.append(
            Scenario(
                f"sd-iter-{schema}",
                "formats",
                (Step("sd_iter", read),),
                (
                    THROUGHPUT,
                    Metric("construct_s", "construct s", "lower"),
                    Metric("first_sample_s", "first sample s", "lower"),
                ),
                prep=prep,
                physical=Step("limit_iter", read),
                physical_label=MMAP_ITER,
            )
        )
    found.append(
        Scenario(
            "import",
            "formats",
            (Step("import"),),
            (
                Metric("import_s", "import streaming s", "lower"),
                Metric("wall_s", "fresh python + import s", "lower"),
                Metric("rss_mb", "RSS after import MB", "lower"),
                Metric("notable_modules", "modules imported", "info"),
            ),
        )
    )
    found.append(
        Scenario(
            "import-api",
            "formats",
            (Step("import_api"),),
            (
                Metric("import_api_s", "import + MDSWriter, LocalDataset, StreamingDataset s", "lower"),
                Metric("rss_mb", "RSS after that MB", "lower"),
                Metric("notable_modules", "modules imported", "info"),
            ),
        )
    )
    return found


def _later(scale: float) -> list[Scenario]:
    tokens = _n("tokens", scale)
    # Constructing is cheap, so from BENCH_SCALE=0.5 (the published figures') on this measures the 100k shards a
    # target names.
    shards = max(1000, int(STARTUP_SHARDS * min(1.0, 2 * scale)))
    resume_n = max(2048, int(RESUME_SAMPLES * scale))
    spark_rows = max(10_000, int(SPARK_ROWS * scale))
    return [
        Scenario(
            "dataloader-w2",
            "later",
            (
                Step(
                    "dataloader",
                    {"schema": "tokens", "n": tokens, "dataset": "ds-tokens", "workers": 2, "batch_size": 32},
                ),
            ),
            (THROUGHPUT, Metric("time_to_first_batch_s", "time to first batch s", "lower")),
            prep=_dataset_prep("tokens", tokens, "ds-tokens"),
            requires=("StreamingDataset",),
            physical=Step("sd_iter", {"schema": "tokens", "n": tokens, "dataset": "ds-tokens", "batch_size": 32}),
            physical_label="ours in-process (StreamingDataset, no DataLoader)",
        ),
        Scenario(
            "memory-w2",
            "later",
            (Step("memory", {"n": tokens, "dataset": "ds-tokens"}),),
            (
                Metric("main_uss_mb", "main process USS MB", "lower"),
                Metric("main_pss_mb", "main process PSS MB", "lower"),
                Metric("main_heap_uss_mb", "main process anonymous USS MB", "lower"),
                Metric("worker_uss_mb", "DataLoader worker USS MB (largest)", "lower"),
                Metric("worker_pss_mb", "DataLoader worker PSS MB (largest)", "lower"),
                Metric("worker_heap_uss_mb", "DataLoader worker anonymous USS MB (largest)", "lower"),
            ),
            prep=_dataset_prep("tokens", tokens, "ds-tokens"),
            requires=("StreamingDataset", "StreamingDataLoader"),
            physical=Step("limit_memory", {"n": tokens, "dataset": "ds-tokens"}),
            physical_label="torch DataLoader over numpy views of the mapped shards",
        ),
        Scenario(
            f"startup-{_count_label(shards)}-shards",
            "later",
            (Step("startup", {"shards": shards, "dataset": f"shards-{shards}"}),),
            (
                Metric("construct_s", "construct s", "lower"),
                Metric("first_sample_s", "first sample s", "lower"),
                Metric("peak_rss_mb", "peak RSS MB", "lower"),
            ),
            prep=(Step("many_shards", {"shards": shards, "out": f"shards-{shards}"}),),
            requires=("StreamingDataset",),
        ),
        Scenario(
            "resume",
            "later",
            (
                Step("resume_record", {"dataset": "resume-text", "workers": 2}),
                Step("resume", {"dataset": "resume-text", "workers": 2}),
            ),
            (Metric("time_to_first_batch_s", "resume: time to first batch s", "lower"),),
            prep=_dataset_prep("text", resume_n, "resume-text", size_limit=1 << 20),
            requires=("StreamingDataset", "StreamingDataLoader"),
        ),
        Scenario(
            "remote-cold-warm",
            "later",
            (Step("remote", {"schema": "tokens", "n": tokens, "remote": "remote-tokens"}),),
            (
                Metric("cold_samples_per_s", "cold epoch samples/s", "higher"),
                Metric("warm_samples_per_s", "warm epoch samples/s", "higher"),
            ),
            prep=_dataset_prep("tokens", tokens, "remote-tokens", compression="zstd", size_limit=1 << 22),
            requires=("StreamingDataset",),
        ),
        Scenario(
            f"spark-{_count_label(spark_rows)}-rows",
            "later",
            (Step("spark", {"n": spark_rows}),),
            (
                Metric("rows_per_s", "dataframe_to_mds rows/s", "higher"),
                Metric("session_s", "Spark session start s", "info"),
            ),
            requires=("streaming.base.converters:dataframe_to_mds",),
            max_rounds=1,
        ),
    ]


def catalogue(scale: float) -> list[Scenario]:
    """Every scenario, sized for BENCH_SCALE=scale, in run order."""
    return _formats(scale) + _later(scale)


def select(scenarios: list[Scenario], only: list[str]) -> tuple[list[Scenario], set[str]]:
    """Scenarios matching BENCH_ONLY words (a name, a group, or a name prefix like 'write-text').

    Returns the selection and the names matched by a word other than a group name (explicit
    requests, which run even when gated). An empty `only` selects everything, explicitly nothing.
    """
    if not only:
        return list(scenarios), set()
    groups = {s.group for s in scenarios}
    chosen, explicit, unknown = [], set(), []
    for word in only:
        hits = [s for s in scenarios if word in (s.name, s.group) or s.name.startswith(word.rstrip("-") + "-")]
        if not hits:
            unknown.append(word)
        if word not in groups:
            explicit.update(s.name for s in hits)
        chosen.extend(s for s in hits if s not in chosen)
    if unknown:
        valid = sorted(groups) + [s.name for s in scenarios]
        raise ValueError(
            f"BENCH_ONLY: unknown scenario(s) {', '.join(unknown)}; "
            f"valid: {', '.join(valid)} (or a name prefix such as 'write')"
        )
    order = {s.name: i for i, s in enumerate(scenarios)}
    return sorted(chosen, key=lambda s: order[s.name]), explicit
