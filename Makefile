# The commands developers, hooks and CI run. `make dev` runs summon; `make test` passes the tests.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test unit fuzz lint typecheck bench install clean down

$(STAMP): pyproject.toml scripts/bootstrap
	scripts/bootstrap

install: $(STAMP)

# A local PostgreSQL + Synapse, content published, summon on the mock model, a demo user and room.
dev: $(STAMP)
	$(BIN)/summon dev

# Every test: unit (pure), db (real PostgreSQL) and matrix (real Synapse + matrix-nio); the tests start
# and stop the services themselves.
test: $(STAMP)
	$(BIN)/pytest -q

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

# 10,000 generated cases through each reader of untrusted input (events, HTML, reply fallbacks, transaction
# bodies, content files, command arguments): no crash, no case over 100 ms of CPU, every error a clear
# line. `make test` runs the same tests on a fixed slice of 500 cases each.
fuzz: $(STAMP)
	SUMMON_FUZZ_CASES=10000 $(BIN)/pytest -q -p no:cacheprovider tests/fuzz

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Benchmarks print figures and ratios; they assert nothing about speed.
bench: $(STAMP)
	$(BIN)/python -m tests.bench
	$(BIN)/python -m tests.bench.engine
	$(BIN)/python -m tests.bench.load
	$(BIN)/python -m tests.bench.untrusted
	$(BIN)/python -m tests.bench.door
	$(BIN)/python -m tests.bench.recall

down:
	synapse-dev/down
	SUMMON_RUN_DIR=.dev/test-run synapse-dev/down

clean: down
	rm -rf .dev $(VENV)
