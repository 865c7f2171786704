# The README's commands. Every target uses .venv/bin/... directly; bootstrap prepares it.
BIN := .venv/bin

.PHONY: bootstrap demo test test-pythons check bench bench-smoke ci

bootstrap:
	bash scripts/bootstrap.sh

demo: bootstrap
	bash scripts/demo.sh

test: bootstrap
	$(BIN)/pytest -q

# The suite on every supported Python (3.10-3.13, pyenv builds), one venv each in .venvs/.
test-pythons: bootstrap
	bash scripts/test-pythons.sh

check: bootstrap
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict
	$(BIN)/sentinel rules check

bench: bootstrap
	$(BIN)/python -m bench

# A few-second benchmark run for CI, once bench/ has an entry point.
bench-smoke: bootstrap
	@if [ -f bench/__main__.py ]; then $(BIN)/python -m bench --smoke; \
	else echo "bench-smoke: skipped, bench/__main__.py does not exist yet" >&2; fi

ci: bootstrap
	$(MAKE) --no-print-directory check
	$(MAKE) --no-print-directory test
	@# make test has just run the suite on .venv's Python; the other supported ones follow.
	bash scripts/test-pythons.sh --skip-python $(BIN)/python
	$(MAKE) --no-print-directory bench-smoke
