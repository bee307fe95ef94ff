# memstream: `make run` starts everything, `make test` runs the whole suite.
SHELL := /bin/bash
VENV := .venv/bin

.PHONY: setup run test test-slow lint bench soak schemas reindex reembed clean

setup:
	@bash infra/setup.sh

# Ctrl-C is how it stops: honcho's 130 is a clean stop, not an error of make's.
run: setup
	@$(VENV)/honcho start -f Procfile || [ $$? -eq 130 ]

# The slowest tests are named at the end, so that the suite's time (under 20 minutes on two
# cores) is watched where it grows; those marked slow run apart.
test: setup lint
	$(VENV)/pytest -q --durations=15 -m "not slow" tests

test-slow: setup
	$(VENV)/pytest -q --durations=15 -m slow tests

lint:
	$(VENV)/ruff check .
	$(VENV)/mypy streams processors schemas embedder stores publisher client/memstream_client bench harness
	$(VENV)/lint-imports
	$(VENV)/python -m schemas.export --check

bench: setup
	$(VENV)/python -m bench

# Minutes of load while workers, the broker and Postgres are killed in turn; not in CI.
soak: setup
	$(VENV)/python -m bench.soak

schemas:
	$(VENV)/python -m schemas.export

reindex:
	$(VENV)/python -m stores.index.reindex

# Move the store to another embedding model (workers stopped): `make reembed MODEL=e5-small-v2`.
reembed: setup
	$(VENV)/python -m streams.commands.reembed $(if $(MODEL),--model $(MODEL))

clean:
	-infra/kafka/broker.sh stop
	-$(VENV)/python -m stores.postgres.local_server stop
	rm -rf var
