# Two commands on a fresh machine: `make notebooks` (unpack the shipped world, run every notebook)
# and `make test`. Each calls course.py (`python course.py notebooks` / `python course.py test`, the same
# commands without make, on Windows too), which creates or reuses .venv by itself, with the exact versions of
# requirements.lock, from the Python 3.11, 3.12 or 3.13 that PYTHON names (tools/check_python.py refuses
# others). The notebooks' install has only what they need; `make test` adds the developer tools.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
# Which torch build pip takes is the platform's: the CPU one on macOS and Windows, on Linux the CUDA one
# (about 4 GB; it runs on the CPU too) unless PIP_ARGS names PyTorch's CPU wheel index (docs/platforms.md).
# The shipped world is used with either.
PIP_ARGS ?=
export PIP_ARGS
NEED_PYTHON = @command -v $(PYTHON) >/dev/null || { echo "make: '$(PYTHON)' is not on PATH: install Python 3.11, 3.12 or 3.13 and name it, e.g. make notebooks PYTHON=python3.12" >&2; exit 1; }
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help test lint notebooks data world worlds rekey pack pack-fast fast-world lab bench clean book check-site assignments release slides test-bare-kernel test-instructor

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/^([a-z-]+):.*## /  make \1\t/' | expand -t 22

# The developer tools (pytest, ruff, Sphinx) on top of the notebooks' install, for the maintainers' targets.
$(STAMP): pyproject.toml requirements.lock
	$(NEED_PYTHON)
	$(PYTHON) course.py install dev

# The linter and the tests with two workers of one torch thread each (course.py test).
test:  ## the linter, unit tests, every notebook in fast mode, the shipped world's outputs (two workers)
	$(NEED_PYTHON)
	$(PYTHON) course.py test

lint: $(STAMP)  ## ruff on helpers/, tests/, tools/, book/ and course.py (pyproject.toml's [tool.ruff])
	$(VENV)/bin/ruff check --quiet helpers tests tools book course.py

# Two notebooks at a time (two kernels, each running the next notebook of one queue after emptying its
# namespace and settings; they read the same cache: the same outputs as one at a time, each in a fresh
# kernel), with OpenMP threads that sleep while they wait, as in `make world` (course.py notebooks).
notebooks:  ## execute the whole series in full mode, saving outputs (two notebooks at a time)
	$(NEED_PYTHON)
	$(PYTHON) course.py notebooks

data:  ## unpack the shipped world (data/world/), then build whatever it lacks (full mode)
	$(NEED_PYTHON)
	$(PYTHON) course.py install
	$(PY) -m helpers build

# Two worker processes with the world's two torch threads each (the same numbers as one process); OpenMP
# threads that sleep while they wait, or four busy threads on two cores slow everything down.
# WORLD_SEED=k trains an independent world (another training stream, initialization and selection, and
# everything downstream) into its own cache, data/scratch/seed-k, and checks its committed result files
# (data/worlds/seed-k/); the default, 0, is the shipped world, also compared file for file with data/world/.
# HELPERS_LONG_BUILDS=1: a build that retrains the world is refused unless asked for by name, as here.
WORLD_SEED ?= 0
world: export OMP_WAIT_POLICY = PASSIVE
world: export HELPERS_LONG_BUILDS = 1
world: export HELPERS_SHIPPED = 0
world: $(STAMP)  ## rebuild a world from scratch (WORLD_SEED=k: another one), then compare it with what is shipped
	$(PY) -m helpers build --world-seed $(WORLD_SEED) --jobs 2
ifeq ($(WORLD_SEED),0)
	HELPERS_CACHE=data/scratch $(PY) -m helpers notebooks --no-save --jobs 2  # builds what `build` left
	HELPERS_CACHE=data/scratch $(PY) -m helpers verify-rebuild  # the shipped entries hold seed 0's results
else
	$(PY) -m helpers world-results --world-seed $(WORLD_SEED) --verify
endif

# The replication worlds beside the shipped one (seed 0): each built into its own cache, then its committed
# result files checked against it. `python -m helpers world-results --world-seed k` (re)writes them.
worlds: $(STAMP)  ## build world seeds 1 and 2 and check their committed results (data/worlds/)
	$(MAKE) world WORLD_SEED=1
	$(MAKE) world WORLD_SEED=2

# Maintainers, after a code change that invalidates shipped entries (a refactor): `make world`, then this
# records the current code's key for every shipped entry the rebuild reproduced file for file (index.json
# only; the archives stay as they are). Entries it could not reproduce need `make pack`.
rekey: $(STAMP)  ## maintainers: after `make world`, re-key the shipped entries it reproduced
	HELPERS_CACHE=data/scratch HELPERS_SHIPPED=0 $(PY) -m helpers rekey

# Maintainers: build, run every notebook (saving outputs) and ship exactly the cache entries they read
# (HELPERS_READ_LOG lists them; `shipped.read_entries` adds what those were built from).
# Two workers, as in `make world` (the same numbers as one process).
pack: export OMP_WAIT_POLICY = PASSIVE
pack: export HELPERS_LONG_BUILDS = 1
pack: $(STAMP)  ## maintainers: rebuild what changed, rerun the notebooks, write data/world/
	rm -f data/read.log
	HELPERS_READ_LOG=$(CURDIR)/data/read.log $(PY) -m helpers build --jobs 2
	HELPERS_READ_LOG=$(CURDIR)/data/read.log $(PY) -m helpers notebooks --jobs 2
	$(PY) -m helpers pack --read-log data/read.log
	HELPERS_CACHE=data/cache $(PY) -m helpers world-results --world-seed 0  # the shipped world's result files
	$(PY) -m helpers notebooks --jobs 2  # again: the setup cells print how many shipped entries the new archives hold

# Maintainers, after a code change that rebuilt fast-mode entries: `make test` builds them (one torch thread,
# under the default settings and the poor world of tests/test_notebooks.py); this ships every valid one
# (data/fast-world/), so that a fresh clone's `make test` unpacks them instead of training them. An archive
# whose entries are unchanged is kept byte for byte.
pack-fast: $(STAMP)  ## maintainers: after `make test`, write data/fast-world/ from the fast cache
	HELPERS_THREADS=1 $(PY) -m helpers pack --fast

# Maintainers: rebuild the fast world from scratch into data/scratch (one torch thread, as `make test`),
# then what the tests' notebook runs build (chapters 01-03 on it, the others on the poor world, whose
# notebooks say what that world misses), and compare it all file for file with data/fast-world/.
fast-world: export OMP_WAIT_POLICY = PASSIVE
fast-world: export HELPERS_THREADS = 1
fast-world: export HELPERS_CACHE = data/scratch
fast-world: $(STAMP)  ## maintainers: rebuild the fast world from scratch and compare it with data/fast-world/
	$(PY) -m helpers build --fast --scratch --jobs 2
	$(PY) -m helpers notebooks --fast --scratch --no-save --only '0[1-3]_*' --jobs 2
	HELPERS_OVERRIDES="$$($(PY) -c 'import json; from helpers.cache.shipped import FAST_OVERRIDES as o; print(json.dumps(o[0]))')" \
		$(PY) -m helpers notebooks --fast --scratch --no-save --only '0[04-7]_*' --jobs 2
	$(PY) -m helpers verify-rebuild --fast

# The extras of `lab` and `bench` are installed once (a stamp each), like .venv itself.
$(VENV)/.installed-lab: $(STAMP)
	$(PYTHON) course.py install lab

$(VENV)/.installed-bench: $(STAMP)
	$(PYTHON) course.py install bench

lab:  ## open the notebooks in JupyterLab
	$(NEED_PYTHON)
	$(PYTHON) course.py lab

bench: $(VENV)/.installed-bench  ## benchmarks (not part of make test)
	$(PY) tests/benchmarks/bench_metrics.py
	$(PY) tests/benchmarks/bench_stats.py
	$(PY) tests/benchmarks/bench_series.py
	$(PY) tests/benchmarks/bench_build.py

# Not part of make test (it installs the whole lock into a fresh venv: minutes): a kernel with only ipykernel
# runs notebook 07 after the setup cell of docs/troubleshooting.md (Colab, a JupyterHub).
test-bare-kernel: $(STAMP)  ## a bare kernel (fresh venv, only ipykernel) runs notebook 07 after the setup cell
	COURSE_BARE_KERNEL=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_bare_kernel.py

# Instructors (docs/instructors/): otter-grader and nbconvert come with `course.py install grade`.
$(VENV)/.installed-grade: $(STAMP)
	$(PYTHON) course.py install grade

# One Otter assignment per notebook, from its answer twin (helpers/build/assignments.py): student/ has the
# notebook without solutions and with public tests, autograder/ the zip with the hidden tests. Grade a
# submission with `.venv/bin/otter run -a dist/assignments/NN_name/autograder/*.zip submission.ipynb`.
assignments: $(VENV)/.installed-grade  ## instructors: graded assignments in dist/assignments (otter-grader)
	rm -rf dist/assignments
	$(PY) -m helpers assignments

# The student release (helpers/build/release.py) and its website, then a check that nothing in either
# points at an answer: no answer twins, reference checks, instructor pages or links to them.
release: assignments  ## instructors: the student release in dist/release (no answers), with its website
	rm -rf dist/release dist/release-doctrees
	$(PY) -m helpers release
	cd dist/release && ../../$(VENV)/bin/sphinx-build -b html -c book -d ../release-doctrees -W --keep-going \
		-q . site
	$(PY) -m helpers release --verify
	$(PY) tools/check_links.py dist/release/site

# The instructors' tools' own tests (the autograder on notebook 07's assignment, the slides), which need
# otter-grader and nbconvert; not part of make test, whose 10 minutes they would exceed.
test-instructor: $(VENV)/.installed-grade  ## instructors: the autograder and slides tests (otter-grader, nbconvert)
	HELPERS_FAST=1 HELPERS_THREADS=1 OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -p no:cacheprovider \
		tests/test_assignments.py tests/test_slides.py

slides: $(VENV)/.installed-grade  ## instructors: lecture decks (reveal.js) from the learner notebooks, in dist/slides
	$(PY) tools/slides.py --out dist/slides

# The course website, from the committed executed notebooks (never re-executed); book/conf.py. Fails on any
# Sphinx warning (a broken link or anchor, bad markup) and on a broken internal link in the HTML.
book: $(STAMP)  ## the course website in build/site (docs/guide.md is the front page)
	rm -rf build/site build/doctrees build/jupyter_execute
	$(VENV)/bin/sphinx-build -b html -c book -d build/doctrees -W --keep-going -q . build/site
	$(PY) tools/check_links.py build/site

# Not part of make test: every page of build/site in headless Chromium (Debian's chromium, driven by
# Playwright from .venv-site) at a phone's and a laptop's width (CHECK_WIDTHS, CSS px), its navigation buttons
# clicked, then notebook 01's explorer in JupyterLab; screenshots in build/screenshots/.
# The notebook whose ipywidgets explorer (the cell tagged `explorer`) check-site moves.
CHECK_NOTEBOOK ?= notebooks/01_2_what_ece_can_tell.ipynb
CHECK_WIDTHS ?= 390,1366
check-site: book $(VENV)/.installed-lab  ## check the website and the notebook explorer in a real browser
	tools/install_chromium.sh
	test -x .venv-site/bin/python || $(PYTHON) -m venv .venv-site
	.venv-site/bin/python -m pip install --quiet -r tools/requirements-site.txt
	.venv-site/bin/python tools/check_site.py --site build/site --screenshots build/screenshots \
		--widths $(CHECK_WIDTHS) --lab-python $(PY) --notebook $(CHECK_NOTEBOOK)

clean:  ## remove the caches and the virtual environment (never the shipped data/world/)
	rm -rf data/cache data/scratch $(VENV)
