# The two commands a newcomer needs: `make run` and `make test`. Both build .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run quickstart test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The main job: the workspace service and its web file browser on the embedded SQLite default.
run: $(STAMP)
	$(BIN)/workspacefs serve

quickstart: $(STAMP)
	$(BIN)/python examples/quickstart.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

# Every core, one test file per worker (each worker starts its own PostgreSQL and S3 servers).
unit: $(STAMP)
	$(BIN)/pytest -n auto --dist loadfile

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/bench_compare.py
	$(BIN)/python bench/bench_memory.py
	$(BIN)/python bench/bench_host.py
	$(BIN)/python bench/bench_sql.py
	$(BIN)/python bench/bench_server.py
	$(BIN)/python bench/bench_deployment.py
	$(BIN)/python bench/bench_container.py
	$(BIN)/python bench/bench_patch.py
	$(BIN)/python bench/bench_objectstore.py
	$(BIN)/python bench/bench_targets.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
