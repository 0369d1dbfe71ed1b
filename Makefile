# Two commands do all the set-up on a fresh clone: `make demo` and `make test`.
# Both create .venv and install the package into it on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
# Here `pip install torch==2.13.0` takes the CPU build from local disk; a bare `torch`
# requirement would pull a multi-GB CUDA build. On a GPU machine: make setup TORCH_SPEC=torch
TORCH_SPEC ?= torch==2.13.0
OUT ?= results/demo

.PHONY: setup demo test results
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev,ray]"
	touch $@

demo: setup
	$(VENV)/bin/emergence demo --out $(OUT)

test: setup
	$(PY) -m pytest -q -x --timeout=900

# Every number docs/results*.md quote, at the documented scale: hours on 2 cores, never part of
# `make test`. Prints the total time; run it again to resume where it stopped.
results: setup
	OMP_NUM_THREADS=1 $(VENV)/bin/emergence results --out results
