# Two commands on a fresh machine: `make notebooks` (unpack the shipped world, run every notebook)
# and `make test`. Each creates or reuses .venv by itself, with the exact versions of requirements.lock.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU build of torch; an unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0

.PHONY: test notebooks data world pack lab bench clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -c requirements.lock -e '.[dev]' $(TORCH)
	touch $(STAMP)

# Two workers with one torch thread each (the shipped-world checks ask for the world's two), and OpenMP
# threads that sleep rather than spin while they wait: two busy-waiting workers on two cores slowed a
# 20-second test to seven minutes.
test: $(STAMP)  ## unit tests, every notebook in fast mode, the shipped world's outputs (two workers)
	HELPERS_FAST=1 HELPERS_THREADS=1 OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -n 2

notebooks: data  ## execute the whole series in full mode, saving outputs
	$(PY) -m helpers notebooks

data: $(STAMP)  ## unpack the shipped world (data/world/), then build whatever it lacks (full mode)
	$(PY) -m helpers build

world: $(STAMP)  ## rebuild every artifact from scratch in data/scratch/, then compare it with data/world/
	HELPERS_CACHE=data/scratch HELPERS_SHIPPED=0 $(PY) -m helpers build
	HELPERS_CACHE=data/scratch HELPERS_SHIPPED=0 $(PY) -m helpers notebooks --no-save
	HELPERS_CACHE=data/scratch HELPERS_SHIPPED=0 $(PY) -m helpers verify-rebuild

pack: $(STAMP)  ## maintainers: write data/world/ from the cache, after `make notebooks`
	$(PY) -m helpers pack

lab: $(STAMP)  ## open the notebooks in JupyterLab
	$(PY) -m pip install --quiet -c requirements.lock -e '.[lab]' $(TORCH)
	$(VENV)/bin/jupyter lab notebooks

bench: $(STAMP)  ## benchmarks (not part of make test)
	$(PY) -m pip install --quiet -c requirements.lock -e '.[bench]' $(TORCH)
	$(PY) tests/benchmarks/bench_metrics.py
	$(PY) tests/benchmarks/bench_stats.py
	$(PY) tests/benchmarks/bench_series.py

clean:  ## remove the caches and the virtual environment (never the shipped data/world/)
	rm -rf data/cache data/scratch $(VENV)
