# Every target creates what it needs: a fresh clone runs `make test` or `make demo` directly.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check lib handlers tests bench infra

typecheck: $(STAMP)
	$(BIN)/mypy --strict lib/sqsjobs

unit: $(STAMP)
	$(BIN)/pytest tests

test: lint typecheck unit

demo: $(STAMP)
	$(BIN)/python -m demo

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
