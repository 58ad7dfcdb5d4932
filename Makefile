# Lynn Gym — two commands: `make run` and `make test`. Both bootstrap everything they need.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
# Python writes .pyc files (this machine sets PYTHONDONTWRITEBYTECODE=1): the venv is installed without bytecode
# (see $(STAMP)), and the package's and tests' modules are compiled once, not in every process that imports them.
# Outside make on such a machine, unset it once too, or every new interpreter compiles what it imports.
unexport PYTHONDONTWRITEBYTECODE
# pip warns about every missing local index folder on this machine; hide that noise only.
QUIET := 2>&1 | { grep -v '^WARNING: Location' || true; }
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
RESULTS ?= results

.PHONY: run test bench lint venv system chromium node clean contracts mutate models

# The venv: CPU torch first (an unpinned torch pulls a multi-GB CUDA build), then the package with every CPU extra.
# uv installs the ~150 packages in parallel: ~20 s here against pip's ~3 min (the same versions). uv reads no
# pip.conf, so the CPU torch wheel is taken, alone, from pip's find-links folder; where uv or that wheel is
# missing, pip does it all as before. No bytecode at install: compiling all 22,000 modules (torch, transformers,
# ray, sympy, ...) took 75 of the install's 93 CPU-s; the first process that imports a module writes its .pyc
# instead, so only what runs is compiled, once (the unexport at the top; concurrent writers are safe).
PIP := $(BIN)/pip install -q --disable-pip-version-check --no-compile
UV := $(BIN)/uv pip install -q --python $(BIN)/python
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@wheels=$$($(BIN)/pip config get global.find-links 2>/dev/null || true); \
	if [ -n "$$wheels" ] && $(PIP) uv $(QUIET) && \
	   $(UV) --no-index --no-deps --find-links "$$wheels" torch==2.13.0 && $(UV) -e '.[all]'; then \
	  echo "venv: installed with uv (torch from $$wheels)"; \
	else \
	  echo "venv: installing with pip"; $(PIP) torch==2.13.0 $(QUIET) && $(PIP) -e '.[all]' $(QUIET); \
	fi
	@$(BIN)/python -c "import torch, sys; sys.exit(f'torch {torch.__version__} is a CUDA build: pip install torch==2.13.0 (CPU)' if torch.version.cuda else 0)"
	@touch $(STAMP)

venv: $(STAMP)

# System pieces: Debian's chromium (Playwright's own download fails here) and the npm packages (anvil, solc, contracts).
chromium:
	@command -v chromium >/dev/null || [ -n "$$LYNN_CHROMIUM" ] || \
	  { (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

$(NODE_STAMP): package.json $(wildcard package-lock.json)
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(NODE_STAMP)

node: $(if $(wildcard package.json),$(NODE_STAMP))

system: chromium node

run: venv system
	$(BIN)/lynn suite --out $(RESULTS)

# Retrain every zoo model (models/) from scratch with its card's commands and replace the shipped files.
models: venv system
	$(BIN)/lynn zoo build --install

# Two pytest-xdist workers, a test file each at a time (module fixtures stay in one worker; session fixtures that
# train or record are built once per run, tests/_shared.py), the slowest files first (tests/conftest.py's
# SLOW_FILES; --no-loadscope-reorder keeps that order). The 30 slowest tests are listed at the end.
test: venv system
	$(BIN)/python -m pytest tests -n 2 --dist loadfile --no-loadscope-reorder --durations=30

bench: venv system
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Rebuild the EVMQuest contract artifacts (committed; the runtime needs no node) with the pinned solc-js.
contracts: node
	node lynn/envs/evmquest/contracts/build.js

# Mutation testing of the scoring/parsing/routing/staleness code (scripts/mutate.py, docs/mutation.md); not part of `test`.
mutate: venv
	$(BIN)/pip install -q --disable-pip-version-check -e '.[mutate]' $(QUIET)
	nice $(BIN)/python scripts/mutate.py $(MODULES)

# Type checker: mypy (pure pip, no node download), config in pyproject.toml [tool.mypy]; on the packages
# whose records and APIs other rooms depend on (issue 28 item 4).
lint: venv
	$(BIN)/ruff check lynn tests benchmarks examples
	$(BIN)/ruff format --check lynn tests benchmarks examples
	$(BIN)/mypy lynn/eval lynn/wrappers lynn/lm lynn/records.py

clean:
	rm -rf $(VENV) node_modules $(RESULTS)
