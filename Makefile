# The two commands of the README: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PARAMS ?= params/default.yaml
BIN     = $(VENV)/bin

.PHONY: run test lint bench clean-outputs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(VENV)/.installed $@

## run: install, execute the notebook sequence with $(PARAMS), write outputs/<run>/report/index.html
run: $(VENV)/.installed
	$(BIN)/cube run $(PARAMS)

## test: install with dev extras, lint, run every test (incl. one end-to-end notebook run)
test: $(VENV)/.installed-dev lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check cube tests benchmarks

## bench: the benchmark scripts (they print their headline figure last)
bench: $(VENV)/.installed-dev
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean-outputs:
	rm -rf outputs/*/ outputs/cache.sqlite*
