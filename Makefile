# Two set-up commands work on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv demo test test-fast lint format bench clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# compat: a plain .pth path instead of an import hook that costs ~20 ms at every start
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]' --config-settings editable_mode=compat
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	bash examples/quickstart/demo.sh

# both cores for most tests; the tests marked slow (multi-process stress, crash tests
# that wait out a liveness bound or a grace) then run alone, as their timing assumes
test: $(STAMP)
	$(BIN)/pytest -n 2 --durations=25 -m "not slow"
	$(BIN)/pytest --durations=10 -m slow

test-fast: $(STAMP)
	$(BIN)/pytest -n 2 --durations=15 -m "not slow and not spark"

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m compileall -q dataflow  # as an installed package is: bytecode ready
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache demo-run
