# ocslab: `make demo` and `make test` each install everything first (idempotent; run as root).
.PHONY: setup demo test test-unit docs clean-runs

# The virtual environment scripts/setup.sh makes and the targets run: .venv, or another path in
# OCSLAB_VENV (the lab VMs keep theirs outside the shared checkout; docs/lab.md).
OCSLAB_VENV ?= .venv
export OCSLAB_VENV

setup:
	bash scripts/setup.sh

demo: setup
	$(OCSLAB_VENV)/bin/ocslab run experiments/demo.yaml

test:
	OCSLAB_EXTRAS=test,torch,ryu bash scripts/setup.sh
	$(OCSLAB_VENV)/bin/python -m pytest -q tests $(PYTEST_ARGS)

test-unit:
	OCSLAB_EXTRAS=test bash scripts/setup.sh
	$(OCSLAB_VENV)/bin/python -m pytest -q -m "not emulation" tests

docs:
	OCSLAB_EXTRAS=docs bash scripts/setup.sh
	$(OCSLAB_VENV)/bin/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

clean-runs:
	rm -rf runs
