# The README's commands. Every target uses .venv/bin/... directly; bootstrap prepares it.
BIN := .venv/bin

.PHONY: bootstrap bootstrap-test demo demo-files test test-pythons check bench bench-smoke ci dashboard facts-doc metrics-doc e2e soak prometheusrule

# What demo and check need; bootstrap-test adds the test peers (prometheus, alertmanager,
# mtail, sqlite3), used as binaries with their services left disabled.
bootstrap:
	bash scripts/bootstrap.sh

bootstrap-test:
	bash scripts/bootstrap.sh --test-peers

demo: bootstrap
	bash scripts/demo.sh

test: bootstrap-test
	$(BIN)/pytest -q

# The suite on every supported Python (3.10-3.13, pyenv builds), one venv each in .venvs/.
test-pythons: bootstrap-test
	bash scripts/test-pythons.sh

check: bootstrap
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict
	$(BIN)/sentinel rules check
	$(BIN)/python -m tools.grafana --check
	$(BIN)/python -m sglang_sentinel.facts --check
	$(BIN)/python -m tools.metrics_doc --check
	$(BIN)/python -m tools.prometheusrule --check
	$(BIN)/python -m tools.demo_files --check

# Regenerate docs/architecture.md's facts table from sglang_sentinel/facts.py.
facts-doc: bootstrap
	$(BIN)/python -m sglang_sentinel.facts

# Regenerate README.md's and docs/architecture.md's metrics tables from
# sglang_sentinel/daemon/families.py (tools/metrics_doc.py).
metrics-doc: bootstrap
	$(BIN)/python -m tools.metrics_doc

# Regenerate deploy/grafana/sglang-sentinel.json from tools/grafana.py (a build-time tool).
dashboard: bootstrap
	$(BIN)/python -m tools.grafana

# Regenerate demo/docker and demo/pods (the demo's container case) from demo/journal.export.
demo-files: bootstrap
	$(BIN)/python -m tools.demo_files

# Regenerate deploy/kubernetes/prometheusrule.yaml from deploy/prometheus/*.yml.
prometheusrule: bootstrap
	$(BIN)/python -m tools.prometheusrule

bench: bootstrap-test
	$(BIN)/python -m bench
	$(BIN)/python -m bench.lowerbound
	$(BIN)/python -m bench.decode
	$(BIN)/python -m bench.files

# A few-second benchmark run for CI, once bench/ has an entry point.
bench-smoke: bootstrap-test
	@if [ -f bench/__main__.py ]; then $(BIN)/python -m bench --smoke; \
	else echo "bench-smoke: skipped, bench/__main__.py does not exist yet" >&2; fi
	$(BIN)/python -m bench.lowerbound --smoke
	$(BIN)/python -m bench.decode --smoke
	$(BIN)/python -m bench.files --smoke

# The fault suite at full length (minutes): >= 100 SIGKILLs of a following daemon, 10^6
# generated hostile lines, a crash loop of 6,000 startups through a daemon (state size and
# RssAnon at READY bounded); `make test` runs the same tests shorter.
soak: bootstrap-test
	SENTINEL_SOAK_KILLS=100 SENTINEL_HOSTILE_LINES=1000000 SENTINEL_SOAK_STARTUPS=6000 \
		$(BIN)/pytest -q -s \
		tests/daemon/test_daemon_crash.py tests/pipeline/test_hostile_lines.py tests/pipeline/test_faults.py \
		tests/state/test_state_faults.py tests/pipeline/test_clock.py tests/pipeline/test_fault_suite.py \
		tests/pipeline/test_file_pipeline.py tests/state/test_retention.py

# The suite runs compiled and pure in the same four runs: .venv's hot path is compiled with mypyc
# (SENTINEL_MYPYC=1, see setup.py), the other Pythons' venvs run it pure; SENTINEL_HOT_PATH has
# each run check that it runs what it should (tests/host/test_compiled.py).
ci: export SENTINEL_MYPYC := 1
ci: bootstrap-test
	$(MAKE) --no-print-directory check
	SENTINEL_HOT_PATH=compiled $(MAKE) --no-print-directory test
	@# make test has just run the suite on .venv's Python; the other supported ones follow,
	@# less the tests that drive outside engines (dockerd, podman, a Prometheus fleet), whose
	@# Python side the suite on .venv's Python has just covered (`make test-pythons` runs all).
	@# CI_SKIP_MINORS: minors whose suite runs elsewhere (.ci/run: 3.13 inside Debian 13's root);
	@# CI_LIGHT_MINORS: minors run less the tests marked heavy (.ci/run: 3.12).
	SENTINEL_MYPYC= SENTINEL_HOT_PATH=pure \
		bash scripts/test-pythons.sh --skip-python $(BIN)/python \
		$(foreach m,$(CI_SKIP_MINORS),--skip-minor $(m)) \
		$(foreach m,$(CI_LIGHT_MINORS),--light-minor $(m)) -m "not engines"
	$(MAKE) --no-print-directory bench-smoke

# The end-to-end under a real systemd PID 1 (as root): Debian 12 and 13 roots booted with
# systemd-nspawn, installed as the README says. Not part of `ci`; .ci/run runs it after.
E2E_SUITES ?= bookworm trixie
e2e:
	bash scripts/e2e.sh $(E2E_SUITES)
