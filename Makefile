# Two commands on a fresh machine: `make notebooks` (build everything, run every notebook)
# and `make test`. Each creates or reuses .venv by itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU build of torch; an unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0

.PHONY: test notebooks data lab bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[dev]' $(TORCH)
	touch $(STAMP)

test: $(STAMP)  ## unit tests + every notebook in fast mode
	HELPERS_FAST=1 $(PY) -m pytest -q

notebooks: data  ## execute the whole series in full mode, saving outputs
	$(PY) -m helpers notebooks

data: $(STAMP)  ## train the model and cache every artifact (full mode)
	$(PY) -m helpers build

lab: $(STAMP)  ## open the notebooks in JupyterLab
	$(PY) -m pip install --quiet -e '.[lab]' $(TORCH)
	$(VENV)/bin/jupyter lab notebooks

bench: $(STAMP)  ## benchmarks (not part of make test)
	$(PY) -m pip install --quiet -e '.[bench]' $(TORCH)
	$(PY) tests/benchmarks/bench_metrics.py
	$(PY) tests/benchmarks/bench_stats.py
	$(PY) tests/benchmarks/bench_series.py

clean:  ## remove the cache and the virtual environment
	rm -rf data/cache $(VENV)
