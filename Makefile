# Each target is the only command a fresh machine needs: it creates .venv and installs what it uses.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
SHARED_TOKENIZERS := $(abspath ../shared/tokenizers)
export TIKTOKEN_CACHE_DIR ?= $(if $(wildcard $(SHARED_TOKENIZERS)),$(SHARED_TOKENIZERS),)

.PHONY: demo test lint bench venv clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m contextwindow demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
