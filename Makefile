# Two commands do all the set-up on a fresh clone: `make demo` and `make test`.
# Both create .venv with the first `python3` on PATH (3.11 to 3.13, Debian 12's 3.11.2 included)
# and install the package into it on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
# Here `pip install torch==2.13.0` takes the CPU build from local disk (/opt/wheels holds one for
# Python 3.11 only); on 3.12 and 3.13, or without local wheels, it is PyPI's build for Linux, the
# CUDA one (2.13.0+cu130, 3.7 GB more in .venv: README, Set-up). On a GPU machine: make setup TORCH_SPEC=torch
TORCH_SPEC ?= torch==2.13.0
OUT ?= results/demo
# The interpreter .venv is made with (3.11 to 3.13): make setup PYTHON=/usr/bin/python3.12
PYTHON ?= python3
# The package versions the results were made with (issue 19): every install below is constrained
# by it, so that a fresh clone trains the same bits; `make lock` rewrites it from the venv (a
# deliberate change: re-train the suite and regenerate the results after it).
CONSTRAINTS ?= constraints.txt

.PHONY: findings setup setup-dev setup-notebook setup-test browser demo format lint check-constraints check-latest check-floors test test-fast pytest results results-paper lock
# setup: what `emergence` needs; setup-dev adds the tests' tools (pytest, nbclient, playwright, ruff, mypy) and
# Ray, which `make demo` does without (14 s of its first run here).
setup: $(VENV)/.installed
setup-dev: $(VENV)/.installed-dev
# a Jupyter kernel "emergence-lens" on this .venv (ipykernel; `make setup-dev` installs it too), for
# the notebooks under analyses/notebooks in any Jupyter (JupyterLab, Notebook, VS Code)
setup-notebook: setup
	$(UV) -e ".[notebook]" || $(PIP_INSTALL) -e ".[notebook]"
	$(PY) -m ipykernel install --user --name emergence-lens --display-name "emergence-lens (.venv)"

# Installs go through uv (pinned in constraints.txt), which resolves, unpacks and compiles in
# parallel: `make setup-dev` on a fresh clone, empty caches, took 176 s with pip alone and 93 s
# with uv here (2026-12-01). torch: uv takes the wheel only from where pip itself would look for
# local wheels (find-links, no index: here the CPU build on local disk): PIP_FIND_LINKS when set
# (pip reads it before its configuration files, and `pip config get` does not show it), else
# pip's configured global.find-links; anywhere else
# pip installs it, with the machine's indexes. --compile-bytecode: pip compiles on install, uv
# does not by default, and where PYTHONDONTWRITEBYTECODE is set (it is on these machines) every
# process would otherwise compile torch and transformers again on import (11 s -> 26 s here).
# Where uv fails or cannot be installed, pip does it all.
UV = $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -c $(CONSTRAINTS)
FIND_LINKS = $(or $(strip $(PIP_FIND_LINKS)),$(shell python3 -m pip config get global.find-links 2>/dev/null))
PIP_INSTALL = $(PY) -m pip install -q -c $(CONSTRAINTS)
DEV_SPEC := -e ".[dev,ray]"

# The Pythons pyproject.toml's requires-python admits (checked first: one line, not a resolver's
# error), and a python3 that can make a venv (Debian and Ubuntu ship venv apart: python3-venv).
$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	@$(PYTHON) -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' || { echo "error: PYTHON=$(PYTHON) ($$(command -v $(PYTHON))) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); emergence-lens needs 3.11 to 3.13: put one first on PATH or give make PYTHON=/path/to/python3.12"; exit 1; }
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { echo "error: $$(command -v $(PYTHON)) cannot create a virtual environment (no ensurepip): on Debian/Ubuntu, sudo apt-get install python3-venv"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) uv || { echo "note: uv cannot be installed; pip installs everything"; $(PY) -m pip install -q --upgrade pip; }
	@echo "installing $(TORCH_SPEC): from a local wheel where pip finds one (seconds), else from the index (a CUDA build is about 2.5 GB: minutes, quietly)"
	$(if $(FIND_LINKS),$(UV) --no-deps --no-index $(addprefix --find-links ,$(FIND_LINKS)) "$(TORCH_SPEC)" 2>/dev/null ||) $(PIP_INSTALL) "$(TORCH_SPEC)"
	@echo "installing emergence-lens and its dependencies (constraints.txt)"
	$(UV) -e . || $(PIP_INSTALL) -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(UV) $(DEV_SPEC) || $(PIP_INSTALL) $(DEV_SPEC)
	touch $@

# Rewrite constraints.txt from the venv's installed versions (the project itself left out). Its
# comments and its environment-marker lines stay (tools/lock_constraints.py: a package pinned once
# per side of a Python boundary keeps both lines, the one for the venv's Python updated); then
# check-constraints says whether the new set still resolves on every supported Python. Lock from a
# venv on 3.11 with the CPU torch: one with PyPI's CUDA torch (3.12, 3.13 here) adds its nvidia-*,
# cuda-* and triton pins. The venv is the new file's set, so its stamp is renewed (no re-install).
lock: setup
	$(PY) -m pip freeze --exclude-editable | sed -e 's/+cpu$$//' | $(PY) tools/lock_constraints.py $(CONSTRAINTS) > $(CONSTRAINTS).tmp
	mv $(CONSTRAINTS).tmp $(CONSTRAINTS)
	touch $(VENV)/.installed
	@$(MAKE) --no-print-directory check-constraints

# Does constraints.txt resolve, with every extra `make` installs, on each supported Python? uv's
# resolver answers for a Python it is not running on (--python-version, patch level included:
# environment markers such as python_full_version < "3.11.5" are evaluated for it), installing
# nothing: the floor 3.11.0, Debian 12's 3.11.2, 3.11.5 (where soupsieve's pins change), 3.12 and
# 3.13. Each failing version is named, and any fails the target (hence `make test`). It needs the
# package index (or uv's cache); ~30 s here. CHECK_PYTHONS="3.12" checks fewer.
CHECK_PYTHONS ?= 3.11.0 3.11.2 3.11.5 3.12 3.13
check-constraints: setup
	@failed=""; for v in $(CHECK_PYTHONS); do \
	  $(VENV)/bin/uv pip compile pyproject.toml --extra dev --extra ray --extra notebook -c $(CONSTRAINTS) \
	    --python-version $$v --quiet --no-header -o /dev/null || failed="$$failed $$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "error: $(CONSTRAINTS) does not resolve on Python$$failed (uv's reasons above)"; exit 1; fi; \
	echo "$(CONSTRAINTS) resolves on Python $(CHECK_PYTHONS)"

# Declared ranges that are true (issue 66): what a pip user gets is not constraints.txt but the newest
# versions pyproject.toml allows. check-latest resolves them without constraints (uv, --resolution
# highest) into a fresh $(CHECK_VENV), lists them in $(CHECK_VENV)/versions.txt, runs the fast tier
# and tools/check_resolution.sh (one short training of each of the five synthetic architectures, one
# `emergence run` on a tiny suite). check-floors does the same at the floors (--resolution
# lowest-direct: the lowest version of each dependency pyproject.toml names). torch alone is held at
# TORCH_SPEC, installed first as `make setup` does (here the CPU build from local disk; the newest
# from PyPI would be the CUDA build, GBs). Needs the package index. Not part of `make test` (the fast
# tier again on top of the install; 2026-12-06 on 2 cores at load average ~25: install 32 s, the
# runs of tools/check_resolution.sh 6-16 min): a tier of its own (README, Set-up), run before a
# release or when a dependency publishes a new version.
RESOLUTION ?= highest
CHECK_VENV ?= .venv-$(RESOLUTION)
CHECK_PY = $(CHECK_VENV)/bin/python
check-latest: setup
	rm -rf $(CHECK_VENV)
	$(PYTHON) -m venv $(CHECK_VENV)
	echo "$(TORCH_SPEC)" > $(CHECK_VENV)/torch-override.txt
	$(if $(FIND_LINKS),$(VENV)/bin/uv pip install -q --python $(CHECK_PY) --no-deps --no-index $(addprefix --find-links ,$(FIND_LINKS)) "$(TORCH_SPEC)" ||) $(VENV)/bin/uv pip install -q --python $(CHECK_PY) --no-deps "$(TORCH_SPEC)"
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(CHECK_PY) --resolution $(RESOLUTION) \
	  --override $(CHECK_VENV)/torch-override.txt $(addprefix --find-links ,$(FIND_LINKS)) -e ".[dev]"
	$(VENV)/bin/uv pip freeze -q --python $(CHECK_PY) --exclude-editable > $(CHECK_VENV)/versions.txt
	@echo "$(RESOLUTION) resolution: $$(wc -l < $(CHECK_VENV)/versions.txt) packages in $(CHECK_VENV)/versions.txt"
	$(CHECK_PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --timeout=300 -m "not slow"
	sh tools/check_resolution.sh $(CHECK_PY)
check-floors:
	@$(MAKE) --no-print-directory check-latest RESOLUTION=lowest-direct

demo: setup
	$(VENV)/bin/emergence demo --out $(OUT)

# Code style (docs/developing.md, Code style): ruff's lint rules, ruff's formatting and mypy on the
# public API (emergence_lens and every module its EXPORTS table names, read from the table, so that a
# moved module is checked where it now lives). Any finding fails `make lint`, hence `make test`.
# The tree is formatted by `ruff format .`; `make format` applies both fixes.
PUBLIC_MODULES = $(shell $(PY) -c 'import emergence_lens as el; print(" ".join(sorted(set(el.EXPORTS.values()))))')
format: setup-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

lint: setup-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy -m emergence_lens $(addprefix -m ,$(PUBLIC_MODULES))

# The browser tests open the report in headless Chromium (Debian's package, driven by playwright):
# installed here when missing and the machine allows it (root with apt-get); never fatal here,
# since under CI a missing browser fails those tests with a message saying so. `make test` runs it
# beside the set-up (a sub-make with -j2; 32 s of apt-get here that no longer wait for uv).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (apt-get) for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	      >/dev/null 2>&1 || echo "warning: could not install chromium; the browser tests will fail under CI"; \
	  else echo "note: chromium is missing and cannot be installed here (needs root and apt-get)"; fi; }

setup-test:
	@$(MAKE) --no-print-directory -j2 --output-sync=target setup-dev browser

# lint runs beside pytest (a sub-make with -j2; its few lines land among pytest's): mypy's ~40 s of one
# core cost the suite ~20 s that way; a finding still fails `make test`, after the tests have run.
# check-constraints takes lint's slot once lint is done (listed after pytest, so pytest never waits).
test: setup-test
	@$(MAKE) --no-print-directory -j2 lint pytest check-constraints

# --timeout=900 per test function (pyproject.toml: timeout_func_only): fixture work such as the
# quick suite's training is not on that clock; it fails only after 10 min without progress
# (tests/conftest.py, FIXTURE_STALL_SECONDS; at load 12-19 its training took more than 1800 s).
pytest: setup-dev
	$(PY) -m pytest -q -n 2 --dist loadgroup --timeout=900 --durations=30  # two workers (pytest-xdist; 873-1014 s on 2 cores of an AMD EPYC, 2026-12-01/02, nothing else running; a fresh clone's whole CI=true .ci/run, empty caches, no Chromium: 960 s and 1148 s); loadgroup: tests sharing an expensive fixture share a worker (tests/conftest.py, WORKER_GROUPS); no -x: one failure must not hide the others; --durations: the 30 slowest, in every log

# The fast tier, for the edit-test loop: every test not marked `slow` (tests/conftest.py marks the
# users of the trained quick suite and of the executed notebooks; the rest carry @pytest.mark.slow),
# so nothing trains the embedded suite or executes a notebook (four page tests open Chromium where it is installed). No lint (`make lint`),
# no set-up of Chromium; `make test` runs everything and is what CI runs.
test-fast: setup-dev
	$(PY) -m pytest -q -n 2 --dist loadgroup --timeout=300 --durations=10 -m "not slow"  # 812 tests in 352 s (5 min 52 s), 2026-12-03, a fresh clone on Debian's Python 3.11.2, 2 cores at load average 8; idle it is faster

# Every number docs/results*.md quote, at the documented scale: hours on 2 cores, never part of
# `make test`. Prints the total time; run it again to resume where it stopped.
results: setup
	OMP_NUM_THREADS=1 $(VENV)/bin/emergence results --out results

# The findings in docs/results.md regenerated from the kept runs (docs/data/), no training: every
# block's words from the judge, then the answer that opens the page (issue 65). About 15 min on 2 cores.
findings: setup
	$(PY) -m analyses.population --finished-only --update-docs
	$(PY) -m analyses.population_decoupled --finished-only --update-docs
	$(PY) -m analyses.population_heads_dhead --finished-only --update-docs
	$(PY) -m analyses.population --spec population-8h-long --finished-only --update-docs
	$(PY) -m analyses.forcing_control_8h --finished-only --update-docs
	$(PY) -m analyses.population_mechanism --no-compute --update-docs
	$(PY) -m analyses.population_mechanism --pair largest-jump --no-compute --update-docs
	$(PY) -m analyses.population_seed_split --finished-only --update-docs
	$(PY) -m analyses.population_seed_split --spec population-seed-split-128d --finished-only --update-docs
	$(PY) -m analyses.answer --update-docs

# The paper-scale entries (issue 27; ~11 h on 2 idle cores, estimates in docs/results-synthetic.md
# and docs/results-architectures.md). On a GPU: make results-paper DEVICE=cuda. Resumable.
results-paper: setup
	OMP_NUM_THREADS=1 $(VENV)/bin/emergence results --paper-scale --out results $(if $(DEVICE),--device $(DEVICE))
