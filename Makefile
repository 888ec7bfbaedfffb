# Two entry points (see README): `make demo` runs the main job end to end, `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
NODE_DIR := .ci/node
# streaming-community 0.14.2 in its own virtualenv, for the differential suite (tests/differential).
REF_VENV := .venv-ref

.PHONY: demo test bench

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

bench: $(VENV)/.installed
	bash benchmarks/run.sh
