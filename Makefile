# Two entry points (see README): `make demo` runs the main job end to end, `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
NODE_DIR := .ci/node
LINTED := streaming tests benchmarks notebooks

.PHONY: demo test lint bench

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(NODE_DIR)/.installed:
	npm install --silent --no-audit --no-fund --prefix $(NODE_DIR) azurite@3.35.0
	touch $@

demo: $(VENV)/.installed
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) notebooks/run_local.py notebooks/01_convert_to_mds.py
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) notebooks/run_local.py notebooks/02_train_from_volume.py
	$(PY) notebooks/formats_demo.py

# Lint and types first: any finding fails `make test` before the (much longer) test run starts.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/mypy

test: lint $(NODE_DIR)/.installed
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q

bench: $(VENV)/.installed
	bash benchmarks/run.sh
