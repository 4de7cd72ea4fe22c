# Every target creates or reuses .venv/ and installs the pinned set itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test test-long chaos lint audit bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==25.3
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# `make test` stays under 10 minutes on 2 cores; tests over a minute are `make test-long`.
test: $(STAMP)
	$(PY) -m pytest -q -m "not long"

test-long: $(STAMP)
	$(PY) -m pytest -q -m long

chaos: $(STAMP)
	$(PY) -m harness chaos $(CHAOS_ARGS)

# A campaign for a time budget, then Hypothesis; JUnit XML and HTML in the run folder.
AUDIT_MINUTES ?= 20
audit: $(STAMP)
	$(PY) -m harness audit --minutes $(AUDIT_MINUTES) $(AUDIT_ARGS)

bench: $(STAMP)
	$(PY) -m harness.bench $(BENCH_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check harness tests
	$(PY) -m ruff format --check harness tests
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build *.egg-info
