# Two commands a newcomer needs: `make demo` and `make test`. Each sets up .venv on its own.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit slow pg bench e2e schema docs clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lightmem2 demo

lint: $(STAMP)
	$(BIN)/ruff check lightmem_plugin tests benchmarks
	$(BIN)/ruff format --check lightmem_plugin tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The fast inner loop: everything but e2e and the tests marked slow, on every core (pytest-xdist; a
# module's tests stay on one worker so its module-scoped fixtures are built once).
unit: $(STAMP)
	$(BIN)/python -m pytest --ignore=tests/e2e -m "not slow and not postgres" -n auto --dist loadscope

# The tests marked slow, one at a time: soak, SIGKILL campaigns, time/memory bounds, load, full-trace
# replays, the TokenMizer and Headroom peers. Several bound time or memory, so they must not compete for the cores.
slow: $(STAMP)
	$(BIN)/python -m pytest --ignore=tests/e2e -m "slow and not postgres" -p no:xdist

# The tests against a real PostgreSQL (the team gateway's shared store): the fixture starts a
# throwaway cluster with initdb (PostgreSQL must be installed; skipped without it), one at a time.
pg: $(STAMP)
	$(BIN)/python -m pytest --ignore=tests/e2e -m postgres -p no:xdist

# The real hosts (OpenClaw, Claude Code, Codex CLI from npm), installed into a cache outside the repo.
e2e: $(STAMP)
	$(BIN)/python -m pytest tests/e2e

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python benchmarks/calibration.py
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/continuous.py
	$(BIN)/python benchmarks/compaction_record.py
	$(BIN)/python benchmarks/cache_ttl.py
	$(BIN)/python benchmarks/frontier.py
	$(BIN)/python benchmarks/compaction_frontier.py
	$(BIN)/python benchmarks/bench_server.py
	$(BIN)/python benchmarks/bench_gateway.py
	$(BIN)/python benchmarks/readme_table.py

schema: $(STAMP)
	$(BIN)/python -c "from lightmem_plugin.config import schema_text; open('config.schema.json','w').write(schema_text())"
	$(BIN)/python -c "from pathlib import Path; from lightmem_plugin.hosts.openclaw.manifest import write_manifest; write_manifest(Path('adapters/openclaw'))"

# The generated parts of README.md and docs/: the reference from the code (modes, passes, CLI, config
# keys), the benchmark tables from the committed files in benchmarks/results/. Tests fail when stale.
docs: $(STAMP)
	$(BIN)/python -c "from pathlib import Path; from lightmem_plugin.commands._readme import update_all; update_all(Path('.'))"
	$(BIN)/python benchmarks/readme_table.py

clean:
	rm -rf $(VENV) build *.egg-info
