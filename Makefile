# Two commands matter on a fresh machine (see README.md):
#   make up     install everything, then run the local stack in the foreground
#   make test   install everything, then run the linters and the whole test suite
.PHONY: install up test lint clean

install:
	@bash deploy/install.sh

up: install
	.venv/bin/txcoord up $(ARGS)

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

test: lint
	.venv/bin/pytest $(PYTEST_ARGS)

clean:
	rm -rf .venv .cache warehouse
