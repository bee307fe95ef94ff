# memstream: `make run` starts everything, `make test` runs the whole suite.
SHELL := /bin/bash
VENV := .venv/bin

.PHONY: setup run test lint bench schemas reindex clean

setup:
	@bash infra/setup.sh

run: setup
	$(VENV)/honcho start -f Procfile

test: setup lint
	$(VENV)/pytest -q tests

lint:
	$(VENV)/ruff check .
	$(VENV)/mypy streams processors schemas embedder stores client bench harness
	$(VENV)/lint-imports
	$(VENV)/python -m schemas.export --check

bench: setup
	$(VENV)/python -m bench

schemas:
	$(VENV)/python -m schemas.export

reindex:
	$(VENV)/python -m stores.reindex

clean:
	-infra/kafka/broker.sh stop
	-$(VENV)/python -m stores.local_postgres stop
	rm -rf var
