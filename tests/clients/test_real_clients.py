"""llm-foundry and composer, unchanged, over this package and over the reference: the same bytes, the same batches.

The outside oracle here is the most used client code of MosaicML Streaming run as its users run it. Two side
virtualenvs (``make clients-venvs``: tests/clients/setup_venv.sh) hold the same pinned llm-foundry, composer,
transformers and torch, one beside this checkout and one beside streaming-community 0.14.2.
``client_driver.py`` runs the whole grid of ``scenarios.py`` in each, at once, each in its own interpreter, and
dumps every batch; the tests below compare the dumps element for element (values, dtypes, shapes, keys, order)
and read the converted shards byte for byte. Resumption states and composer checkpoints are crossed: each side
resumes from the other's as well as from its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.clients import scenarios as grid
from tests.clients.compare import assert_same_outcome, batch_count, first_difference, load

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLIENTS = Path(os.environ.get("MDS_CLIENTS_DIR", REPO / ".ci" / "clients"))
DRIVER = HERE / "client_driver.py"
LLM_FOUNDRY_SDIST = CLIENTS / "llm_foundry-0.22.0"
RUN_TIMEOUT = 1500

pytestmark = pytest.mark.timeout(RUN_TIMEOUT + 300)


def python_of(side: str) -> Path:
    python = CLIENTS / side / "bin" / "python"
    if not (CLIENTS / side / ".installed").is_file():
        pytest.fail(f"no side virtualenv at {CLIENTS / side}: run `make clients-venvs` first")
    return python


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both sides' dumps: the inputs made once, then both drivers at once (they wait for each other's first
    half before resuming from each other's states)."""
    work = tmp_path_factory.mktemp("clients")
    pythons = {side: python_of(side) for side in grid.SIDES}
    if not (LLM_FOUNDRY_SDIST / "tests").is_dir():
        pytest.fail(f"no llm-foundry sdist at {LLM_FOUNDRY_SDIST}: run `make clients-venvs` first")
    subprocess.run([pythons["ref"], DRIVER, "inputs", work], cwd=work, check=True, timeout=300)
    running = {}
    for side, peer in zip(grid.SIDES, reversed(grid.SIDES)):
        log = open(work / f"{side}.log", "wb")
        command = [pythons[side], DRIVER, "run", work, side, peer, LLM_FOUNDRY_SDIST]
        running[side] = (subprocess.Popen(command, cwd=work, stdout=log, stderr=subprocess.STDOUT), log)
    deadline = time.monotonic() + RUN_TIMEOUT
    try:
        while any(process.poll() is None for process, _ in running.values()):
            failed = [side for side, (process, _) in running.items() if process.returncode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        for process, log in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    for side, (process, _) in running.items():
        if process.returncode != 0:
            tail = (work / f"{side}.log").read_text(errors="replace")[-6000:]
            pytest.fail(f"the {side} driver exited with {process.returncode}:\n{tail}")
    return work


def test_each_side_runs_the_pinned_clients_beside_its_own_package(work):
    found = {side: json.loads((work / side / "versions.json").read_text()) for side in grid.SIDES}
    for side in grid.SIDES:
        assert found[side]["llm-foundry"] == "0.22.0"
        assert found[side]["composer"] == "0.32.1"
        assert found[side]["transformers"] == "4.51.3"
        assert found[side]["torch"].startswith("2.13.0")
        assert found[side]["streaming.__version__"] == "0.14.2"  # ours stands in for that release
    assert found["ours"]["streaming.__file__"] == str(REPO / "streaming" / "__init__.py")
    assert found["ref"]["streaming.__file__"].startswith(str(CLIENTS / "ref"))  # not this checkout's
    assert "streaming-community==0.14.2" in found["ref"]["distributions"]
    assert not any(name.startswith("streaming-community") for name in found["ours"]["distributions"])


def _tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.parametrize(
    "name", [*(f"convert-{name}" for name in grid.CONVERTED), *(f"write-{name}" for name in grid.WRITTEN)]
)
def test_converters_and_writer_produce_the_same_bytes(work, name):
    """llm-foundry's converters (its 4-process merge included) and MDSWriter: shards and index.json identical."""
    for side in grid.SIDES:
        result = load(work, side, name)
        assert "error" not in result, f"{side}: {result.get('error')}\n{result.get('traceback')}"
    dataset = name.split("-", 1)[1]
    folders = [dataset, "ft_uploaded_local"] if dataset == "ft_uploaded" else [dataset]
    for folder in folders:
        reference, ours = _tree(work / "ref" / "data" / folder), _tree(work / "ours" / "data" / folder)
        assert any(path.endswith("index.json") for path in reference), sorted(reference)
        assert sorted(reference) == sorted(ours)
        different = [path for path in reference if reference[path] != ours[path]]
        assert not different, f"{folder}: {different} differ"


@pytest.mark.parametrize(
    ("kind", "name"),
    [*(("text", name) for name in grid.TEXT), *(("finetuning", name) for name in grid.FINETUNING)],
    ids=lambda value: value,
)
def test_loader_batches_are_the_references(work, kind, name):
    """build_text_dataloader / build_finetuning_dataloader: every batch of every rank equal, or the same error."""
    reference, ours = load(work, "ref", f"{kind}-{name}"), load(work, "ours", f"{kind}-{name}")
    key = "ranks" if "world" in (grid.TEXT if kind == "text" else grid.FINETUNING)[name] else "batches"
    assert_same_outcome(reference, ours, (key,))
    if "error" not in reference:
        assert batch_count(reference) > 1


@pytest.mark.parametrize("case", list(grid.RESUMPTION))
def test_resumption_crossed_between_packages(work, case):
    """Composer-style: state_dict mid-epoch, a new loader in a new interpreter loads it and reads the rest. Each
    side resumes from its own state and from the other package's; every continuation is the reference's."""
    spec = grid.RESUMPTION[case]
    first = {side: load(work, side, f"resume-{case}") for side in grid.SIDES}
    assert_same_outcome(first["ref"], first["ours"], ("batches", "state"))
    expected = load(work, "ref", f"resumed-{case}-from-ref")
    assert "error" not in expected, expected.get("traceback")
    for consumer in grid.SIDES:
        for producer in grid.SIDES:
            resumed = load(work, consumer, f"resumed-{case}-from-{producer}")
            assert "error" not in resumed, f"{consumer} from {producer}'s state: {resumed.get('traceback')}"
            difference = first_difference(expected["batches"], resumed["batches"], "batches")
            assert difference is None, f"{consumer} resumed from {producer}'s state: {difference}"
    # And the continuation is the uninterrupted epoch's tail, on both sides.
    for side in grid.SIDES:
        full = load(work, side, f"{spec['kind']}-{spec['scenario']}")["batches"]
        stop = spec["stop_after"]
        assert first_difference(full[:stop], first[side]["batches"]) is None
        assert first_difference(full[stop:], load(work, side, f"resumed-{case}-from-{side}")["batches"]) is None


def _each_side_resumes_each_checkpoint_as(work: Path, expected: dict, prefix: str) -> None:
    """Every side's run ``<prefix>-<producer>`` from either package's checkpoint trained as ``expected``: the same
    batches and the same final weights."""
    for consumer in grid.SIDES:
        for producer in grid.SIDES:
            resumed = load(work, consumer, f"{prefix}-{producer}")
            assert "error" not in resumed, f"{consumer} from {producer}'s checkpoint: {resumed.get('traceback')}"
            for key in ("batches", "weights"):
                difference = first_difference(expected[key], resumed[key], key)
                assert difference is None, f"{consumer} from {producer}'s checkpoint: {difference}"


def test_composer_trainer_resumes_from_either_packages_checkpoint(work):
    """composer's Trainer over a StreamingDataset: stopped at a checkpoint, resumed past the epoch's end."""
    first = {side: load(work, side, "trainer-first-half") for side in grid.SIDES}
    assert_same_outcome(first["ref"], first["ours"], ("batches", "weights"))
    assert len(first["ref"]["batches"]) == grid.TRAINER["checkpoint_at"]
    expected = load(work, "ref", "trainer-resumed-from-ref")
    assert "error" not in expected, expected.get("traceback")
    assert len(expected["batches"]) == grid.TRAINER["resume_to"] - grid.TRAINER["checkpoint_at"]
    _each_side_resumes_each_checkpoint_as(work, expected, "trainer-resumed-from")


def test_composer_resumes_a_kept_dataset_on_its_version_and_refuses_a_changed_one(work):
    """A dataset the incremental job keeps: our checkpoints name its version (a key the reference's composer
    resumes from all the same); after a mirror run changed it, our package refuses the mid-epoch checkpoint
    through composer's Trainer, where the reference resumes it silently on the new order."""
    first = {side: load(work, side, "trainer-kept-first-half") for side in grid.SIDES}
    assert_same_outcome(first["ref"], first["ours"], ("batches", "weights"))
    expected = load(work, "ref", "trainer-kept-same-from-ref")
    assert "error" not in expected, expected.get("traceback")
    _each_side_resumes_each_checkpoint_as(work, expected, "trainer-kept-same-from")
    refused = load(work, "ours", "trainer-kept-changed-from-ours")
    assert "ValueError" in refused.get("error_types", []), refused
    assert "on dataset version" in refused["error"] and "'sample_in_epoch' set to 0" in refused["error"], refused
    for consumer, producer in (("ref", "ours"), ("ref", "ref"), ("ours", "ref")):
        resumed = load(work, consumer, f"trainer-kept-changed-from-{producer}")
        assert "error" not in resumed, f"{consumer} from {producer}'s checkpoint: {resumed.get('traceback')}"


@pytest.mark.parametrize("side", grid.SIDES)
def test_llm_foundrys_shipped_tests(work, side):
    """The test modules llm-foundry's PyPI sdist ships (registry, smoke test, config utilities; its data tests are
    not in the sdist), run by each side's driver after its scenarios: all pass beside either package."""
    result = load(work, side, "llm-foundry-tests")
    assert "error" not in result, result.get("traceback")
    assert result["exit_code"] == 0, result["output"]
    assert "13 passed" in result["output"], result["output"]
