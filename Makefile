# The README's two commands: `make demo` and `make test`. Everything else supports them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test demo lint typecheck docs pytest suite bench redis postgres chromium tools node install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --group dev -e '.[serve,agents,postgres,policy]'
	# The real OPA (its Go library, embedded) that tests serve OPA's Data API with: it declares Python >= 3.14 for
	# its wrapper alone (plain ctypes, which runs on 3.11), so it cannot sit in the dev group.
	$(BIN)/pip install --quiet --no-deps --ignore-requires-python opa-golib-python-bindings==0.4.4
	touch $(STAMP)

install: $(STAMP)

# Tests start their own redis-server and PostgreSQL on free ports; these only make sure the binaries exist.
redis:
	@scripts/ensure-redis

postgres:
	@scripts/ensure-postgres

chromium:
	@scripts/ensure-chromium

tools:
	@scripts/ensure-curl-jq

# Node.js's jose, for the test that checks receipts the way a Node.js service does across a key rotation, and
# oidc-provider, the OpenID Connect provider the web inbox's sign-in tests run (scripts/ensure-node does both).
node:
	@scripts/ensure-node

lint: $(STAMP)
	$(BIN)/ruff check engine bot hitl tests bench examples docs
	$(BIN)/ruff format --check engine bot hitl tests bench examples docs

# The documentation site (docs/mkdocs.yml), strict: a broken link or a missing README section fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --quiet --strict -f docs/mkdocs.yml

# Three runs: the examples and the benchmark each have a tools.py, which one mypy run would see as one module. The
# main run checks in two worker processes (40 s -> 24 s from a cold cache on two cores); the small two need none.
typecheck: $(STAMP)
	$(BIN)/mypy --num-workers 2
	$(BIN)/mypy examples
	$(BIN)/mypy bench

pytest: $(STAMP) redis postgres chromium tools node
	@$(MAKE) --no-print-directory suite

# The suite alone, its servers installed. Three workers (pytest-xdist) on two cores: most of the suite waits on real
# processes and leases, so a third worker fills the cores the other two leave idle (2026-11-28, the whole suite: -n 2
# 8 min 56 s, -n 3 7 min 5 s, -n 4 7 min 23 s). Work stealing: a worker that runs out takes tests queued on another
# rather than idling while that one ends the run alone.
# With the bytecode cache on from the start (PYTHONDONTWRITEBYTECODE, set on some machines, turned it off): each
# worker rewrote and compiled the pytest plugins' modules again (tests/__init__.py turns it on only after them).
suite: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n 3 --dist worksteal --durations=15

# Lint first (a second), then the type check beside the suite: mypy's cold run (about 40 s of CPU) fills the time the
# suite's workers wait on the processes they start, instead of going before them. The suite's output stays live and
# its summary last; mypy's goes to .hitl/typecheck.log, shown only when it fails, and either failing fails the target.
# The documentation site is built strictly by the suite itself (tests/test_docs.py, once a run), so `make docs` is
# not run again here.
test: lint redis postgres chromium tools node
	@mkdir -p .hitl
	@echo "make typecheck runs beside the suite (.hitl/typecheck.log, shown here if it fails)"
	@$(MAKE) --no-print-directory typecheck >.hitl/typecheck.log 2>&1 & checks=$$!; \
	$(MAKE) --no-print-directory suite; tests=$$?; \
	if ! wait $$checks; then cat .hitl/typecheck.log; echo "make typecheck failed (above)" >&2; exit 1; fi; \
	exit $$tests

# `make demo PORT=8800` serves the sandbox page on another port (8700 by default).
PORT ?= 8700
demo: $(STAMP)
	$(BIN)/hitl demo --port $(PORT)

bench: $(STAMP) redis postgres
	$(BIN)/pip install --quiet --group bench
	$(BIN)/python bench/store_bench.py
	$(BIN)/python bench/cycle_bench.py
	$(BIN)/python bench/slack_bench.py
	$(BIN)/python bench/gate_bench.py
	$(BIN)/python bench/mcp_bench.py
	$(BIN)/python bench/redis_clients.py
	$(BIN)/python bench/pending_bench.py
	$(BIN)/python bench/queue_bench.py
	$(BIN)/python bench/inbox_bench.py
	$(BIN)/python bench/receipt_bench.py
	$(BIN)/python bench/card_bench.py
	$(BIN)/python bench/flood_bench.py
	$(BIN)/python bench/storm_bench.py
	$(BIN)/python bench/postgres_bench.py
	$(BIN)/python bench/redaction_bench.py
	$(BIN)/python bench/cli_bench.py
	$(BIN)/python bench/consequence_bench.py
	$(BIN)/python bench/publish.py

clean:
	rm -rf $(VENV) .hitl .pytest_cache .mypy_cache .ruff_cache
