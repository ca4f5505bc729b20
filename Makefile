# The one entry point. `make run` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install when the project definition or the C core changes.
$(VENV)/.installed: pyproject.toml src/simeval/_fast.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml src/simeval/_fast.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/simeval score --explain \
		"The Eiffel Tower is in Paris and was finished in 1889." \
		"The Eiffel Tower, completed in 1889, stands in Paris." ; \
	status=$$?; [ $$status -le 1 ] || exit $$status

test: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest

lint: $(VENV)/.installed-test
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

bench: $(VENV)/.installed-test
	$(BIN)/simeval bench quality --data ../shared/data/sts-dev
	$(BIN)/simeval bench speed

clean:
	rm -rf $(VENV) build src/*.egg-info src/simeval/*.so
