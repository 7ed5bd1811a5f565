# The commands developers, hooks and CI run. `make dev` runs summon; `make test` passes the tests.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test unit fuzz lint typecheck bench bench-scale chaos install clean down client-check door-check mention-path

$(STAMP): pyproject.toml scripts/bootstrap
	scripts/bootstrap

install: $(STAMP)

# A local PostgreSQL + Synapse, content published, summon on the mock model, a demo user and room.
dev: $(STAMP)
	$(BIN)/summon dev

# Every test: unit (pure), db (real PostgreSQL) and matrix (real Synapse + matrix-nio); the tests start
# and stop the services themselves. ruff, then mypy, then pytest, each only when the one before passed (ruff
# takes 0.1 s; mypy 16 s on a fresh clone, under 1 s once .mypy_cache holds the last run).
# The suite mostly waits (on Synapse, PostgreSQL, a model's stream), so it runs on TEST_WORKERS workers, a module
# to a worker, each with its own PostgreSQL and Synapse on ports 100 apart (tests/conftest.py); TEST_WORKERS=0
# runs it in one process.
TEST_WORKERS ?= 3
# These machines set PYTHONDONTWRITEBYTECODE: without it unset here every process the suite starts (each worker,
# each `summon` it runs) compiles summon's sources again, 0.3 s each, and pytest rewrites every test file on each
# worker (collection 10 s of CPU, 5 s with the cache).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q \
		$(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

# 10,000 generated cases through each reader of untrusted input (events, HTML, reply fallbacks, transaction
# bodies, content files, command arguments, feeds and feed discovery, voice notes' claims and bytes, the desk's
# public routes): no crash, no case over 100 ms of CPU, every error a clear line. `make test` runs the same tests on a fixed slice of 500 cases each.
fuzz: $(STAMP)
	SUMMON_FUZZ_CASES=10000 $(BIN)/pytest -q -p no:cacheprovider tests/fuzz

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Benchmarks, each against a floor measured in the same run (the echo appservice, raw SQL, …): each prints
# its figures and writes .dev/bench/<name>.json, then one table of every ratio. They assert nothing about speed.
bench: $(STAMP)
	rm -rf .dev/bench
	-$(BIN)/python -m tests.bench
	-$(BIN)/python -m tests.bench.engine
	-$(BIN)/python -m tests.bench.load
	-$(BIN)/python -m tests.bench.ingest
	-$(BIN)/python -m tests.bench.idle
	-$(BIN)/python -m tests.bench.untrusted
	-$(BIN)/python -m tests.bench.door
	-$(BIN)/python -m tests.bench.door_stream
	-$(BIN)/python -m tests.bench.recall --others 0
	@echo; $(BIN)/python -m tests.bench.table

# The scale phases, apart from `make bench` (minutes each): person+recall over a million memories across people;
# a database a year old (tests/bench/year.py: YEAR_SCALE=1 is the full year, 0.05 by default).
bench-scale: $(STAMP)
	$(BIN)/python -m tests.bench.recall
	$(BIN)/python -m tests.bench.year

# Not part of `make test` (minutes, not hours): the standard fault scenarios under a steady stream of mentions on
# the real stack, each judged (tests/chaos/__main__.py; CHAOS_SOAK_MINUTES, CHAOS_TIME_SCALE, CHAOS_ONLY …), then
# several hosts on one PostgreSQL in network namespaces of its own (tests/chaos/hosts.py: a partition and fencing,
# added latency, PgBouncer). Root, for the namespaces; iproute2 and PgBouncer are installed with apt-get if missing.
chaos: $(STAMP)
	@command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || { echo "chaos: installing iproute2"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; }
	@command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || { echo "chaos: installing pgbouncer"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }; }
	$(BIN)/python -m tests.chaos; faults=$$?; $(BIN)/python -m tests.chaos.hosts; hosts=$$?; \
		[ $$faults = 0 ] && [ $$hosts = 0 ]

# The mention's path, counted: the files a mention's transaction passes through from the PUT to the run row, and
# its returns to a file already left (tests/bench/mention_path.py, around the spine test's first mention).
mention-path: $(STAMP)
	$(BIN)/pytest -q -s -p no:cacheprovider -p tests.bench.mention_path \
		"tests/matrix/test_spine.py::test_a_mention_in_a_room_gets_one_answer_from_the_puppet_as_a_reply"

# Opt-in, not part of `make test`: summon as a person sees it, in a real Matrix client (Hydrogen, from the pinned
# hydrogen-view-sdk bundled by the pinned esbuild) in Debian's Chromium, against a running `make dev` (in another
# terminal; SUMMON_RUN_DIR names another dev stack's run directory). Screenshots land in client-check/shots/.
CLIENT_NPM := client-check/node_modules/.installed

$(CLIENT_NPM): client-check/package.json client-check/package-lock.json
	cd client-check && npm ci --no-audit --no-fund --loglevel=error
	touch $@

client-check: $(STAMP) $(CLIENT_NPM)
	cd client-check && npm run --silent build
	$(BIN)/python client-check/check.py

# Opt-in, not part of `make test`: the door as voice front ends use it — Pipecat's OpenAILLMService, LiveKit
# Agents' openai.LLM (timeout=8), the AI SDK's openai("helper") and createOpenAICompatible, openai-python — each
# from its own environment (door-check/.venv, door-check/node_modules, pinned), against `summon dev`'s door (on
# ports of its own) in front of a slow fake provider: one line per client (works / first content / barge-in).
DOOR_PIP := door-check/.venv/.installed
DOOR_NPM := door-check/node_modules/.installed

$(DOOR_PIP): door-check/requirements.txt
	$${PYTHON:-python3} -m venv door-check/.venv
	door-check/.venv/bin/pip install -q --disable-pip-version-check -r door-check/requirements.txt
	touch $@

$(DOOR_NPM): door-check/package.json door-check/package-lock.json
	cd door-check && npm ci --no-audit --no-fund --loglevel=error
	touch $@

door-check: $(STAMP) $(DOOR_PIP) $(DOOR_NPM)
	$(BIN)/python door-check/check.py

down:
	synapse-dev/down
	for run in .dev/test-run .dev/test-run-gw* .dev/door-check-run; do [ -d "$$run" ] && SUMMON_RUN_DIR=$$run synapse-dev/down; done; true

clean: down
	rm -rf .dev $(VENV)
