# ocslab: `make demo` and `make test` each install everything first (idempotent; run as root).
.PHONY: setup demo test test-unit docs clean-runs

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/ocslab run experiments/demo.yaml

test:
	OCSLAB_EXTRAS=test,torch,ryu bash scripts/setup.sh
	.venv/bin/python -m pytest -q tests $(PYTEST_ARGS)

test-unit:
	OCSLAB_EXTRAS=test bash scripts/setup.sh
	.venv/bin/python -m pytest -q -m "not emulation" tests

docs:
	OCSLAB_EXTRAS=docs bash scripts/setup.sh
	.venv/bin/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

clean-runs:
	rm -rf runs
