# Two entry points (see README): `make demo` runs the main job end to end, `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
NODE_DIR := .ci/node
# streaming-community 0.14.2 in its own virtualenv, for the differential suite (tests/differential).
REF_VENV := .venv-ref

# The oldest databricks-sdk we declare (pyproject.toml: databricks-sdk>=0.38); `make test` runs the Databricks-facing
# tests a second time with it. Older SDKs resend an already-read body after a throttled PUT (an empty file).
OLDEST_DATABRICKS_SDK := 0.38.0
OLDEST_DATABRICKS_SDK_DIR := .ci/databricks-sdk-$(OLDEST_DATABRICKS_SDK)
DATABRICKS_TESTS := tests/storage tests/remote -k "dbfs or volumes or databricks"

.PHONY: demo test bench test-databricks-oldest-sdk

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(REF_VENV)/.bench-ready: benchmarks/setup_ref.sh
	BENCH_REF_SPARK=0 bash benchmarks/setup_ref.sh $(abspath $(REF_VENV))

$(NODE_DIR)/.installed:
	npm install --silent --no-audit --no-fund --prefix $(NODE_DIR) azurite@3.35.0
	touch $@

demo: $(VENV)/.installed
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) notebooks/run_local.py notebooks/01_convert_to_mds.py
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) notebooks/run_local.py notebooks/02_train_from_volume.py
	$(PY) notebooks/formats_demo.py

test: $(VENV)/.installed $(NODE_DIR)/.installed $(REF_VENV)/.bench-ready
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) MDS_REFERENCE_PYTHON=$(abspath $(REF_VENV))/bin/python \
		$(PY) -m pytest -q
	$(MAKE) test-databricks-oldest-sdk

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

bench: $(VENV)/.installed
	bash benchmarks/run.sh
