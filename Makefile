# Every target creates or reuses .venv/ and installs the pinned set itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv observer test test-long test-postgres chaos chaos-fleet lint audit bench bench-journal docs browser screenshots clean guards-env test-guards agents scoreboard

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==25.3
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The file-system observer that power-loss trials preload, built from its C source
# (harness/chaos/fsobserve.c) into build/fsobserve, named by the source's hash; beside it the
# tracer of statically linked programs (harness/chaos/fstrace.c), tried once (ptrace).
observer: $(STAMP)
	$(PY) -m harness.chaos.observer

# `make test` stays under 10 minutes on 2 cores; the slow end of the suite is `make test-long`
# (CI runs both). Its tests run on TEST_WORKERS processes (pytest-xdist), a file's tests on
# one of them: most of their time is spent waiting on the processes they start.
TEST_WORKERS ?= 2
test: $(STAMP) observer
	$(PY) -m pytest -q -m "not long" --ignore=tests/guards --ignore=tests/postgres -n $(TEST_WORKERS) --dist loadfile

test-long: $(STAMP) observer
	$(PY) -m pytest -q -m long --ignore=tests/guards --ignore=tests/postgres

# tests/postgres/: the journal in PostgreSQL, on a server of the tests' own (harness/chaos/postgres.py:
# the machine's initdb and postgres, in /dev/shm, as an unprivileged user when run as root).
# Skipped, with the reason, where PostgreSQL is not installed: make installs nothing (README).
test-postgres: $(STAMP)
	$(PY) -m pytest -q tests/postgres

chaos: $(STAMP) observer
	$(PY) -m harness chaos $(CHAOS_ARGS)

# The fleet's campaign (harness/chaos/fleet.py): worker processes, a queue, the faults of a fleet
# (a pause past the lease, a redelivery, a cut COMMIT, kill -9 of the postmaster) on the
# PostgreSQL journal, then its broken journals' self-check. It needs PostgreSQL installed, which
# make never installs: without it, one line says so and nothing runs (CI installs it: .ci/run).
chaos-fleet: $(STAMP)
	$(PY) -m harness chaos-fleet $(FLEET_ARGS)

# A campaign for a time budget, then Hypothesis; JUnit XML and HTML in the run folder.
AUDIT_MINUTES ?= 20
audit: $(STAMP) observer
	$(PY) -m harness audit --minutes $(AUDIT_MINUTES) $(AUDIT_ARGS)

bench: $(STAMP)
	$(PY) -m harness.bench $(BENCH_ARGS)

# Figures 8 and 9 alone: a long journal's restarts and compaction, threads against tasks.
bench-journal: $(STAMP)
	$(PY) -m harness.bench --only restarts --only threads $(BENCH_ARGS)

# The docs site (mkdocs.yml, docs/) into site/; --strict fails on any warning.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# A headless Chromium for the screenshots and the rendering test, from the npm registry
# (the Chromium inside the pinned @sparticuz/chromium tarball, checked against its SHA-512)
# into build/browser (harness/report/browser.py): by npm, or without Node.js by the brotli wheel.
browser:
	$(PY) -m harness.report.browser fetch

# docs/images/index.png and timeline.png: a small failing campaign's report, in that browser.
screenshots: $(STAMP) observer browser
	$(PY) -m harness.screenshots

# The OpenAI Agents SDK and Google ADK guards: their own venv, .venv-guards, with the project
# (its `guards` extra) and those SDKs at the pins of constraints-guards.txt; never in .venv.
GUARDS_VENV := .venv-guards
GUARDS_PY := $(GUARDS_VENV)/bin/python
GUARDS_STAMP := $(GUARDS_VENV)/.installed

guards-env: $(GUARDS_STAMP)

$(GUARDS_STAMP): pyproject.toml constraints-guards.txt
	test -x $(GUARDS_PY) || $(PYTHON) -m venv $(GUARDS_VENV)
	$(GUARDS_PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==25.3
	$(GUARDS_PY) -m pip install --quiet --disable-pip-version-check -c constraints-guards.txt \
		-e '.[guards]' pytest pytest-timeout
	touch $(GUARDS_STAMP)

# tests/guards/ (which `make test` leaves out: they need the SDKs), under .venv-guards.
test-guards: $(GUARDS_STAMP)
	$(GUARDS_PY) -m pytest -q -p no:cacheprovider tests/guards

# Example agents of other frameworks (examples/agents/NAME, each with an agent.toml), tested
# as black boxes: each in its own environment from its own pins (requirements.txt into
# NAME/.venv, or package-lock.json into NAME/node_modules), never in .venv and never by
# `make test`. `make agents` builds them all, `make agent-NAME` one.
AGENT_NAMES := $(notdir $(patsubst %/agent.toml,%,$(wildcard examples/agents/*/agent.toml)))

agents: $(AGENT_NAMES:%=agent-%)

agent-%:
	PYTHON=$(PYTHON) sh examples/agents/build.sh $*

# Every example agent, bare and guarded, under the same campaign: docs/scoreboard.md.
scoreboard: $(STAMP) observer agents
	$(PY) -m harness.blackbox.scoreboard $(SCOREBOARD_ARGS)

# One agent's runs alone, its environment alone built (a shard of the nightly scoreboard,
# .github/workflows/scoreboard.yml): `make scoreboard-langgraph`.
scoreboard-%: $(STAMP) observer agent-%
	$(PY) -m harness.blackbox.scoreboard --only $* $(SCOREBOARD_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check harness tests
	$(PY) -m ruff format --check harness tests
	$(PY) -m mypy

clean:
	rm -rf $(VENV) $(GUARDS_VENV) build site *.egg-info examples/agents/*/.venv examples/agents/*/node_modules examples/agents/*/dist
