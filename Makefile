# Two commands matter on a fresh machine (see README.md):
#   make up     install everything, then run the local stack in the foreground
#   make test   install everything, then run the linters and the whole test suite
.PHONY: install up test lint clean notebooks-rendered

install:
	@bash deploy/install.sh

up: install
	.venv/bin/txcoord up $(ARGS)

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# Three workers on two cores (with two, the test step's later two thirds left the CPU 25-60 %
# idle: its short modules wait on timers), each with its own Spark session and broker, one
# test module at a time each, longest modules first, never more than two of the `kill -9`
# suites at once (docs/testing.md, tests/conftest.py, tests/scheduling.py);
# TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 3
test: lint
	.venv/bin/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The analyst notebooks run against the warehouse of a short real run (the CI test's run,
# tests/notebooks/test_notebooks.py) and saved with their outputs in notebooks/rendered/, so
# that a code host shows their plots; commit what it writes. A few minutes: Spark and Kafka.
notebooks-rendered: install
	NOTEBOOKS_RENDERED=notebooks/rendered CI=true .venv/bin/pytest \
		tests/notebooks/test_notebooks.py -k test_notebook_runs_against_a_real_warehouse

clean:
	rm -rf .venv .cache warehouse
