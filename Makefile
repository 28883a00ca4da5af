# Set-up and main jobs. `make quickstart` and `make test` are the README's two commands.
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= out

.PHONY: install quickstart demo lint test test-fast clean profile-broad

install: $(VENV)/.installed

# torch is pinned to the CPU wheel on disk (unpinned pulls a multi-GB CUDA build); torchrec goes in with
# --no-deps because its metadata asks for an unpinned fbgemm-gpu, which would replace fbgemm-gpu-cpu.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 fbgemm-gpu-cpu==1.8.0
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q --no-deps torchrec==1.8.0
	touch $@

# The whole learned pipeline on this machine, every stage cached in $(OUT)/quickstart (re-run to continue).
quickstart: install
	$(VENV)/bin/autoshard quickstart -o $(OUT)/quickstart

# Grow the committed broad profile of this machine's CPU (the shipped cost model's training data; see
# src/autoshard/data/DEFAULTS.md) towards $(PROFILE_SAMPLES) samples, then pack it for committing. One directory
# per hardware, profiles/<cpu>/broad-seed0 (intel-xeon, amd-epyc): this machine kind comes with either CPU and
# they time one shard 0.6-2.3x apart, so `autoshard profile` refuses to mix them. Resumable: stop it any time
# (then run `autoshard profile-pack` on the directory); the next run measures only the samples not there yet.
# --sobol-axes aligned: the committed profiles were begun before stop 95's joint axes, and a profile resumes
# only with the design it was begun with.
PROFILE_SAMPLES ?= 3200
PROFILE_DIR = profiles/$(shell $(PY) -c 'from autoshard.host import hardware_slug; print(hardware_slug())')/broad-seed0
profile-broad: install
	$(VENV)/bin/autoshard profile --design broad --samples $(PROFILE_SAMPLES) --seed 0 --time-budget-ms 2000 \
		--sobol-axes aligned -o $(PROFILE_DIR)
	$(VENV)/bin/autoshard profile-pack $(PROFILE_DIR)

# Plan a generated 50-table DLRM-like task on 4 devices with a heuristic and print the per-device table.
demo: install
	$(VENV)/bin/autoshard tables synth --num-tables 50 --seed 0 -o $(OUT)/tables.json
	$(VENV)/bin/autoshard plan --tables $(OUT)/tables.json --devices 4 --memory 5GB --algo size_lookup_greedy -o $(OUT)/plan.json

# Lint first (seconds; undefined names, unused variables, leaked file handles), then the test suite.
lint: install
	$(VENV)/bin/ruff check src benchmarks tests

test: lint
	$(PY) -m pytest

# The same without the tests marked slow (multi-process, end-to-end, kernel timing): for quick iteration.
test-fast: lint
	$(PY) -m pytest -m "not slow"

clean:
	rm -rf $(VENV) $(OUT)
