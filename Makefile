# tbscope: `make run` builds everything and runs the demo; `make test` runs every test.
SHELL := /bin/bash
PY := .venv/bin/python
PIP := .venv/bin/pip
VENV_STAMP := .venv/.installed
WHEEL_DIR := dist

.PHONY: run test venv build wheel test-rust test-python lint smoke bench fuzz clean

# The demo logdir is written by tbscope's own SummaryWriter; then the CLI reads it back, and the
# server serves it: until Ctrl-C on a terminal, else (CI) it answers once and stops.
run: build
	$(PY) examples/write_demo_logdir.py demo-logdir
	.venv/bin/tbscope check demo-logdir
	.venv/bin/tbscope ls demo-logdir
	.venv/bin/tbscope summary demo-logdir --stats last,max,argmax
	.venv/bin/tbscope summary demo-logdir --group-by hparam:seed --tags 'eval/*'
	.venv/bin/tbscope sql demo-logdir "SELECT run, max(value) AS best FROM scalars WHERE tag = 'eval/accuracy' GROUP BY run ORDER BY best DESC"
	if [ -t 0 ]; then .venv/bin/tbscope serve demo-logdir; else .venv/bin/tbscope serve demo-logdir --port 0 --check; fi

# One venv with exact versions from constraints.txt; rebuilt when the pins change.
$(VENV_STAMP): requirements-dev.txt constraints.txt
	test -x $(PY) || python3 -m venv .venv
	$(PIP) install --quiet -r requirements-dev.txt -c constraints.txt
	touch $@

venv: $(VENV_STAMP)

# The release wheel, installed into the venv: tests run against what users get.
build: $(VENV_STAMP)
	rm -rf $(WHEEL_DIR)
	.venv/bin/maturin build --release --quiet --out $(WHEEL_DIR)
	$(PIP) install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/tbscope-*.whl

# pytest runs last so its summary closes the output.
test: build test-rust lint smoke test-python

test-rust:
	cargo test --workspace --exclude tbscope-py --quiet

lint: $(VENV_STAMP)
	.venv/bin/mypy
	$(PY) -m mypy.stubtest tbscope._core --allowlist .mypy-stubtest-allowlist

test-python: $(VENV_STAMP)
	$(PY) -m pytest -q

# What `pip install tbscope` gives: the wheel alone in a clean venv, dependencies from PyPI.
smoke:
	rm -rf build/smoke-venv
	python3 -m venv build/smoke-venv
	build/smoke-venv/bin/pip install --quiet $(WHEEL_DIR)/tbscope-*.whl -c constraints.txt
	cd build && smoke-venv/bin/python ../tests/smoke.py
	build/smoke-venv/bin/tbscope --version

bench: build
	$(PY) bench/run.py
	$(PY) bench/writer.py
	$(PY) bench/serve.py

# libFuzzer needs nightly Rust and cargo-fuzz; see crates/tbscope-core/fuzz/README.md for the
# stable-Rust fallback (the same targets as plain binaries).
fuzz:
	cargo install cargo-fuzz --locked --quiet
	cd crates/tbscope-core && cargo +nightly fuzz run tf_record -- -max_total_time=60
	cd crates/tbscope-core && cargo +nightly fuzz run event_file -- -max_total_time=60

clean:
	rm -rf target $(WHEEL_DIR) build .venv demo-logdir
