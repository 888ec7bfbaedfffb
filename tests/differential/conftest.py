"""The differential suite's session: one reference worker, the hypothesis settings, and the seed of this run.

The run's seed is random unless ``MDS_DIFF_SEED`` is set; it is printed in the session header, so a failing run
can be replayed (``MDS_DIFF_SEED=<seed> pytest <the same tests>``). Failing examples are also kept in the
(uncommitted) hypothesis database under ``.hypothesis/differential``, which replays them first next time.

The seed is given to hypothesis's own source of per-test seeds rather than through ``@seed``, because ``@seed``
(like ``--hypothesis-seed``) turns the example database off.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import hypothesis.core
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

import streaming
from streaming import MDSWriter
from tests.differential.reference import ReferenceWorker, reference_python

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = int(os.environ.get("MDS_DIFF_SEED") or random.SystemRandom().randrange(2**32))
DATABASE = DirectoryBasedExampleDatabase(os.path.join(REPOSITORY, ".hypothesis", "differential"))
_worker: ReferenceWorker | None = None
#: Generated cases run this session, by test name (`count_case`); the terminal summary prints them.
CASES: Counter[str] = Counter()


def differential(max_examples: int) -> settings:
    """Hypothesis settings for a differential test: ``max_examples`` cases, no deadline, the example database."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=False,
        database=DATABASE,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )


def count_case() -> None:
    """Count one generated case of the running differential test (shrinking after a failure counts too)."""
    CASES[os.environ["PYTEST_CURRENT_TEST"].split("::")[-1].split(" ")[0]] += 1


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(hypothesis.core.threadlocal, "_hypothesis_global_random"):
        raise RuntimeError("this hypothesis version has no per-test seed source to seed: update conftest.py")
    hypothesis.core.threadlocal._hypothesis_global_random = random.Random(SEED)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop a worker started for tests that were then not run (deselected, or the session was interrupted)."""
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


def pytest_report_header(config: pytest.Config) -> str:
    return f"differential suite: hypothesis seed {SEED} (replay with MDS_DIFF_SEED={SEED})"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print this run's seed, the generated cases run, and how often each known open difference showed up."""
    from tests.differential.compare import OPEN_DIFFERENCES, open_differences_seen

    terminalreporter.section("differential suite")
    terminalreporter.write_line(pytest_report_header(terminalreporter.config))
    if CASES:
        per_test = ", ".join(f"{name} {count:,}" for name, count in sorted(CASES.items()))
        terminalreporter.write_line(f"generated cases run: {sum(CASES.values()):,} ({per_test})")
    if open_differences_seen:
        terminalreporter.write_line("known open differences from the reference (see compare.OPEN_DIFFERENCES):")
        for key, count in sorted(open_differences_seen.items()):
            terminalreporter.write_line(f"{key}: {count} generated cases ({OPEN_DIFFERENCES[key][0]})")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the reference worker as soon as a differential test is selected, so its imports overlap collection."""
    global _worker
    here = os.path.dirname(os.path.abspath(__file__))
    if _worker is None and any(str(item.path).startswith(here) for item in items):
        try:
            _worker = ReferenceWorker(reference_python())
        except RuntimeError:
            pass  # the `reference` fixture raises the explanation in each test


@pytest.fixture(scope="session")
def reference() -> Iterator[ReferenceWorker]:
    """The reference worker, checked to run streaming-community's `streaming` while this process runs ours."""
    global _worker
    worker = _worker or ReferenceWorker(reference_python())
    _worker = None
    try:
        hello = worker.ready()
        ours = os.path.realpath(streaming.__file__)
        theirs = os.path.realpath(hello["streaming"])
        our_package = os.path.join(os.path.realpath(REPOSITORY), "streaming") + os.sep
        # The reference's virtualenv may itself sit inside the repository (`.venv-ref`), so the check is on our
        # package's folder, not on the repository's.
        assert ours.startswith(our_package), f"this process imports {ours}, not the repository's package"
        assert not theirs.startswith(our_package), f"the reference worker imports our package ({theirs})"
        assert hello["version"] == "0.14.2", f"the reference worker runs streaming {hello['version']}, not 0.14.2"
        yield worker
    finally:
        worker.close()


class StreamFolders:
    """MDS datasets with given shard sizes (the epoch plan depends on nothing else), written once per (stream
    position, shard sizes) and opened by both packages' StreamingDatasets."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.made: dict[tuple[int, tuple[int, ...]], str] = {}

    def folder(self, position: int, shard_sizes: list[int]) -> str:
        key = (position, tuple(shard_sizes))
        if key not in self.made:
            folder = os.path.join(self.root, f"s{len(self.made)}")
            with MDSWriter(out=folder, columns={"id": "int64"}, size_limit=None) as writer:
                for size in shard_sizes:
                    for _ in range(size):
                        writer.write({"id": 0})
                    writer.flush_shard()
            self.made[key] = folder
        return self.made[key]


@pytest.fixture(scope="session")
def stream_folders() -> Iterator[StreamFolders]:
    with tempfile.TemporaryDirectory(prefix="diff-streams-") as root:
        yield StreamFolders(root)
