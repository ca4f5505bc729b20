# The one entry point. `make run` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test quick lint bench install clean dist test-wheel docs tables

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install when the project definition or the C core changes.
$(VENV)/.installed: pyproject.toml src/simeval/scoring/_fast.c src/simeval/scoring/_index.c src/simeval/scoring/_cosine.h | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml src/simeval/scoring/_fast.c src/simeval/scoring/_index.c src/simeval/scoring/_cosine.h | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

# Eval Studio and the HTTP API for this machine only (127.0.0.1), on the per-user SQLite
# file or SIMEVAL_DATABASE_URL. Another port: `make run PORT=8080`.
PORT ?= 8000
run: $(VENV)/.installed
	$(BIN)/simeval serve --host 127.0.0.1 --port $(PORT)

test: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(MAKE) docs
	$(BIN)/python -m pytest
	$(MAKE) test-wheel

# The edit-test loop: the unit tests that run inside pytest's own process, in under 3 minutes on
# 2 cores. The rule is the markers: every test but those marked slow, process (starts a process,
# a server or a browser, or opens a socket), browser or postgres (every PostgreSQL case, set by
# tests/conftest.py). --in-process-only fails a test that starts a process or opens an internet
# socket all the same (tests/inprocess.py), so a test that needs one is marked instead of slowing
# this down; a test over ~1.5 s is marked slow. test_fuzz_api.py is not even collected: its
# schema-driven fuzz test (slow) costs ~30 s to collect. `make test` runs everything.
QUICK := not slow and not process and not browser and not postgres
quick: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q --in-process-only -m "$(QUICK)" --ignore=tests/web/test_fuzz_api.py

# An sdist and a wheel in dist/ (the wheel is built from the sdist, so both are checked).
dist: $(VENV)/.installed-test
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The wheel installed into a fresh virtualenv outside the source tree: score, serve, proxy.
test-wheel: dist
	PYTHON=$(PYTHON) .ci/test-wheel dist/simeval-*.whl

# The documentation site (docs/, mkdocs.yml) built into site/. --strict: a broken link or anchor,
# a page left out of the nav or a docstring that does not resolve fails the build (and `make test`).
# NO_MKDOCS_2_WARNING: the theme's banner about MkDocs 2.0, printed on every build otherwise.
# Not --quiet: it hides the warnings from --strict, and the build passes with broken links.
docs: $(VENV)/.installed-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The background tables the wheel ships (src/simeval/scoring/tables/): derive them again after
# a change to the analyzer or to wordfreq/PyStemmer (tests/scoring/test_shipped_tables.py says).
tables: $(VENV)/.installed
	$(BIN)/python -c "from simeval.scoring.idf import ship_background_tables as s; print(*s(), sep='\n')"

lint: $(VENV)/.installed-test
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

bench: $(VENV)/.installed-test
	$(BIN)/simeval bench quality --data ../shared/data/sts-dev
	$(BIN)/simeval bench speed

clean:
	rm -rf $(VENV) build dist site src/*.egg-info src/simeval/*.so src/simeval/*/*.so
