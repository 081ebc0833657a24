# privaudit — developer and user entry points.
#   make audit   set up the environment if needed, run the DVC pipeline, print the verdict
#   make test    set up the environment if needed, run the test suite
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is installed first, on its own, so that nothing else can drag in a CUDA build.
TORCH_VERSION ?= 2.13.0
# Where a CPU torch comes from when no local wheel is on PIP_FIND_LINKS. Set TORCH_INDEX to a
# CUDA index (or pre-install your own torch into .venv) to get a GPU build: setup keeps it.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
STAMP  := $(VENV)/.privaudit-installed

# dvc runs each stage's `python -m stages.<name>` through the shell: the venv must come first on
# PATH for every recipe, or the stages would run with whatever python the caller has.
export PATH := $(abspath $(BIN)):$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))

export DO_NOT_TRACK := 1
export DVC_NO_ANALYTICS := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PYTHONHASHSEED := 0
# Same numbers on every x86-64 CPU with AVX2: numpy and torch pick SIMD kernels by CPU at run time
# (AVX-512 vs AVX2 moved the PRV accountant's epsilon by ~1e-10 and LiDP thresholds by ~1e-6), so
# pin both to the AVX2 kernels. Override (e.g. `make audit ATEN_CPU_CAPABILITY=default`) if needed.
ifeq ($(shell uname -m),x86_64)
export ATEN_CPU_CAPABILITY ?= avx2
export NPY_DISABLE_CPU_FEATURES ?= X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL
endif

.PHONY: help setup audit test test-all test-server browser verdict schedule clean-outputs

help:
	@echo "make audit    - set up .venv if needed, run 'dvc repro', print the release verdict"
	@echo "make test     - set up .venv if needed, run the test suite"
	@echo "make test-all - also the slow simulations and the Prefect server test"
	@echo "make schedule - register and serve the Prefect deployments (see docs/howto/scheduled-audits.md)"
	@echo "make setup    - only create/refresh .venv"

setup: $(STAMP)

# Progress: a line per step, and pip's "Collecting ..." lines while it resolves and downloads (a fresh
# venv spends minutes there). torch is never imported here: importing it before numpy is installed
# prints NumPy's "Failed to initialize NumPy" warning; its version comes from the package metadata.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "setup: 1/3 creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@if ! $(BIN)/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"; then \
	  if ls $${PIP_FIND_LINKS:-/nonexistent}/torch-$(TORCH_VERSION)+cpu-*.whl >/dev/null 2>&1; then \
	    echo "setup: 2/3 installing torch==$(TORCH_VERSION) (CPU wheel from $$PIP_FIND_LINKS)"; \
	    $(BIN)/pip install -q "torch==$(TORCH_VERSION)"; \
	  else \
	    echo "setup: 2/3 installing torch==$(TORCH_VERSION) from $(TORCH_INDEX) (the largest download)"; \
	    $(BIN)/pip install -q "torch==$(TORCH_VERSION)" --extra-index-url $(TORCH_INDEX); \
	  fi; \
	fi
	@$(BIN)/python -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" > $(VENV)/constraints.txt
	@echo "setup: 3/3 keeping $$(cat $(VENV)/constraints.txt); installing privaudit[test] (one line per package)"
	@set -o pipefail; $(BIN)/pip install --progress-bar off -c $(VENV)/constraints.txt -e ".[test]" 2>&1 \
	  | grep --line-buffered -E '^(Collecting|Installing collected|Successfully installed|ERROR|WARNING)' \
	  | sed -u 's/^/setup:   /'
	@touch $@

# make exits 2 whenever a recipe fails; the verdict's own code (1 = the gate failed, 2 = missing, corrupt
# or stale gate) is printed on the last line
VERDICT = $(BIN)/privaudit verdict --gate metrics/gate.json || { rc=$$?; \
	  echo "make: privaudit verdict exited $$rc ($$( [ $$rc = 1 ] && echo 'the release gate failed' || echo 'no usable gate: missing, corrupt or stale' )); make itself exits 2"; exit $$rc; }

audit: setup
	@test -d data/external || { mkdir -p data/external && touch data/external/.gitkeep; }
	PRIVAUDIT_TRIGGER="make audit" $(BIN)/privaudit warm -- $(BIN)/dvc repro
	@$(VERDICT)

verdict: setup
	@$(VERDICT)

test: setup browser
	$(BIN)/python -m pytest -n 2 -q

test-all: setup browser
	$(BIN)/python -m pytest -n 2 -q -m ""

# Debian's chromium + chromedriver for the report's browser test (needs root and apt-get;
# otherwise that one test skips with the reason).
browser: setup
	@bash tests/report/install_browser.sh $(BIN)/pip $(VENV)/constraints.txt \
	  || echo "browser: could not install chromium; tests/report/test_browser.py will skip"

# register and serve the Prefect deployments (start `prefect server` first; docs/howto/scheduled-audits.md)
schedule: setup
	$(BIN)/python -m flows.deploy $(DEPLOY_ARGS)

test-server: setup
	$(BIN)/python -m pytest -q -m server tests/flows

clean-outputs:
	rm -rf data/source data/split data/features data/defenders data/ltu data/canaries data/audit metrics reports
