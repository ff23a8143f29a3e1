# ocslab: `make demo` and `make test` each install everything first (idempotent; run as root).
.PHONY: setup demo test test-unit clean-runs

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

clean-runs:
	rm -rf runs
