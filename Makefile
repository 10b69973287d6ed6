# Two set-up commands work on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv demo test test-fast test-stores lint format bench mutation clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# compat: a plain .pth path instead of an import hook that costs ~20 ms at every start
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]' --config-settings editable_mode=compat
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	bash examples/quickstart/demo.sh

# The Spark tests start first, in the background, at the lowest CPU priority (nice 19):
# they take only the CPU the other stages leave, never the CPU those count on. Meanwhile:
# three workers for most tests (the RunJob processes leave a third of two cores idle at
# two workers); four for those marked long (more only slow them down); then the tests
# marked slow (multi-process stress, crash tests whose timing assumes a machine to
# themselves) one at a time. The Spark tests' output follows. worksteal: a worker that is
# done takes tests queued for another (docs/development.md, "How long the suite takes")
test: $(STAMP)
	@mkdir -p build; \
	nice -n 19 $(BIN)/pytest -n 3 --dist worksteal --durations=15 \
	    -m "spark and not slow and not long" > build/spark-tests.log 2>&1 & spark=$$!; \
	$(BIN)/pytest -n 3 --dist worksteal --durations=25 -m "not slow and not long and not spark" \
	&& $(BIN)/pytest -n 4 --dist worksteal --durations=10 -m "long and not slow" \
	&& $(BIN)/pytest --durations=10 -m slow; rest=$$?; \
	wait $$spark; sparked=$$?; \
	echo "== the Spark tests, run beside the others"; cat build/spark-tests.log; \
	[ $$rest -eq 0 ] && [ $$sparked -eq 0 ]

# the developer's loop (docs/development.md, "How long the suite takes"); make test is the gate
test-fast: $(STAMP)
	$(BIN)/pytest -n 2 --dist worksteal --durations=15 -m "not slow and not spark and not long and not second_store"

# the cases test-fast leaves to make test: each rule's run on PostgreSQL (after a change
# of a store's SQL or of its seam)
test-stores: $(STAMP)
	$(BIN)/pytest -n 2 --dist worksteal --durations=15 -m "second_store and not slow and not spark and not long"

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m compileall -q dataflow  # as an installed package is: bytecode ready
	$(BIN)/python benchmarks/run.py

# mutation testing of the claim, finish, liveness and purge rules (docs/development.md,
# "Mutation run"): hours on two cores; mutmut keeps its copies and verdicts in mutants/
# and goes on where it stopped. The CLIs the tests start import the mutants too
# (PYTHONPATH), and tell mutmut what they reached (tests/mutation); tmp in mutants/.tmp
mutation: $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]' --config-settings editable_mode=compat
	mkdir -p mutants/.hits mutants/.tmp
	TMPDIR=$(CURDIR)/mutants/.tmp MUTMUT_HITS=$(CURDIR)/mutants/.hits \
	PYTHONPATH=$(CURDIR)/mutants:$(CURDIR)/tests/mutation nice -n 10 $(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache demo-run mutants
