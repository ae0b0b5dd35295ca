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
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m ruff format --check src tests benchmarks examples
	$(PY) -m mypy

# Benchmarks with peers in the same run. As root (as in CI) a throwaway PostgreSQL is started for the
# store's rows; elsewhere set CONTEXTWINDOW_TEST_POSTGRES_URL, or those rows say they were not measured.
bench: $(STAMP)
	bash -c 'if [ -z "$${CONTEXTWINDOW_TEST_POSTGRES_URL:-}" ] && [ "$$(id -u)" = 0 ]; then . .ci/postgres.sh && start_postgres; fi; $(PY) -m benchmarks'

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
