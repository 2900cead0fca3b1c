# tbscope: `make run` builds everything and runs the demo; `make test` runs every test.
SHELL := /bin/bash
PY := .venv/bin/python
PIP := .venv/bin/pip
VENV_STAMP := .venv/.installed
WHEEL_DIR := dist

.PHONY: run test venv build wheel test-rust test-python test-torch torch-venv lint smoke bench fuzz fuzz-smoke clean web test-web test-e2e chromium screenshots

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

# The dashboard (web/): npm installs exactly what package-lock.json pins, Vite builds into
# python/tbscope/server/static/, which the wheel and the sdist carry (users never need Node).
# Both steps rerun only when their inputs changed.
WEB_STATIC := python/tbscope/server/static/index.html
WEB_DEPS := web/node_modules/.package-lock.json
WEB_SRC := $(shell find web/src web/index.html web/vite.config.ts web/tsconfig.json -type f 2>/dev/null)

$(WEB_DEPS): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(WEB_STATIC): $(WEB_DEPS) $(WEB_SRC)
	cd web && npm run --silent build

web: $(WEB_STATIC)

# Debian's chromium drives the end-to-end tests (Playwright cannot download a browser here).
chromium:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# The release wheel, installed into the venv: tests run against what users get. zig (from PyPI,
# pinned) links it against glibc 2.17's symbol versions whatever this machine's glibc is, so it
# is a manylinux2014 wheel that installs on every Linux from CentOS 7 / Ubuntu 14.04 on. maturin
# finds zig as `python3 -m ziglang`, hence the venv first on PATH. The zig linker is part of
# cargo's fingerprint of every crate, so this build keeps its own target directory: sharing
# target/release with the plain builds (fuzz-smoke, the sdist test) would rebuild each in turn.
# The sdist (no compiling) carries the built dashboard, so installing it needs Rust but no Node.
ZIG_TARGET_DIR := $(CURDIR)/target/manylinux
build: $(VENV_STAMP) $(WEB_STATIC)
	rm -rf $(WHEEL_DIR)
	PATH=$(CURDIR)/.venv/bin:$$PATH CARGO_TARGET_DIR=$(ZIG_TARGET_DIR) .venv/bin/maturin build --release --quiet --zig --compatibility manylinux2014 --out $(WHEEL_DIR)
	.venv/bin/maturin sdist --out $(WHEEL_DIR)
	$(PIP) install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/tbscope-*.whl

# pytest runs last so its summary closes the output.
test: build test-rust fuzz-smoke lint smoke test-web test-e2e test-torch test-python

# tbscope-remote has no Rust tests (it needs an S3 server: tests/python/test_transport.py and
# test_remote.py drive it against moto), so its HTTP stack is not built a third time here.
test-rust:
	cargo test --workspace --exclude tbscope-py --exclude tbscope-remote --quiet

# Rust formatting and clippy (warnings denied; each allow carries its reason), ruff's lint and
# format check (pinned in constraints.txt; rules in pyproject.toml), mypy strict, the stub.
lint: $(VENV_STAMP)
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	.venv/bin/ruff check --quiet .
	.venv/bin/ruff format --check --quiet .
	.venv/bin/mypy
	$(PY) -m mypy.stubtest tbscope._core --allowlist .mypy-stubtest-allowlist

test-python: $(VENV_STAMP)
	$(PY) -m pytest -q

# Pure dashboard logic (vitest; the smoothing tests run TensorBoard's own code from the venv).
test-web: $(WEB_DEPS) $(VENV_STAMP)
	cd web && npm run --silent typecheck && TBSCOPE_PYTHON=../$(PY) npx vitest run

# The dashboard in a real browser against a real `tbscope serve` (screenshots go to build/).
test-e2e: build chromium
	$(PY) -m pytest -q tests/e2e

# Refresh the README's screenshots from the end-to-end fixture logdir.
screenshots: build chromium
	TBSCOPE_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q tests/e2e/test_screenshots.py

# What `pip install tbscope` gives, each in a clean venv with its dependencies from PyPI: the
# wheel (after auditwheel and the module's symbol table confirm manylinux2014), then the sdist,
# built by pip through maturin like on a machine without a wheel for it. The sdist build shares
# target/release (and so the release dependencies fuzz-smoke compiled) instead of starting cold;
# PIP_CONSTRAINT pins maturin in pip's isolated build environment too. maturin's sdist stamps
# every file with one old date (reproducible sdists), so cargo would take tbscope's own crates
# left in target/release by an earlier build as up to date and never compile the sdist's
# sources: `cargo clean -p` drops them (every crate of the workspace) first, the dependencies stay.
SMOKE_PIP_INSTALL = PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(1)/bin/pip install --quiet --disable-pip-version-check
smoke: $(VENV_STAMP)
	$(PY) tests/check_wheel.py $(WHEEL_DIR)/tbscope-*.whl --max-glibc 2.17
	rm -rf build/smoke-venv build/smoke-sdist-venv
	python3 -m venv build/smoke-venv
	$(call SMOKE_PIP_INSTALL,build/smoke-venv) $(WHEEL_DIR)/tbscope-*.whl
	cd build && smoke-venv/bin/python ../tests/smoke.py
	build/smoke-venv/bin/tbscope --version
	python3 -m venv build/smoke-sdist-venv
	CARGO_TARGET_DIR=$(CURDIR)/target cargo clean --release --quiet -p tbscope-core -p tbscope-remote -p tbscope-py
	CARGO_TARGET_DIR=$(CURDIR)/target $(call SMOKE_PIP_INSTALL,build/smoke-sdist-venv) $(WHEEL_DIR)/tbscope-*.tar.gz
	cd build && smoke-sdist-venv/bin/python ../tests/smoke.py
	build/smoke-sdist-venv/bin/tbscope --version

# torch gets a venv of its own: the package index serves only its CUDA build (about 5 GB
# installed; it runs on the CPU), which stays out of .venv. Built once, reused until a pin in
# constraints-torch.txt changes (the stamp is named after the file's hash). The rest of it
# follows constraints.txt and requirements-torch.txt without downloading torch again.
TORCH_VENV := build/torch-venv
TORCH_PY := $(TORCH_VENV)/bin/python
TORCH_PIN := $(TORCH_VENV)/.pins-$(shell sha256sum constraints-torch.txt | cut -c1-16)
TORCH_PIP_INSTALL := $(TORCH_PY) -m pip install --quiet -r requirements-torch.txt -c constraints.txt -c constraints-torch.txt

$(TORCH_PIN):
	rm -rf $(TORCH_VENV)
	python3 -m venv $(TORCH_VENV)
	$(TORCH_PIP_INSTALL)
	$(TORCH_PY) -c 'import torch; assert torch.ones(2).sum().item() == 2'
	touch $@

$(TORCH_VENV)/.installed: $(TORCH_PIN) requirements-torch.txt constraints.txt
	$(TORCH_PIP_INSTALL)
	touch $@

torch-venv: $(TORCH_VENV)/.installed

# tests/torch against real torch, with the wheel `make build` made. They fail (never skip)
# when torch cannot be imported.
test-torch: build torch-venv
	$(TORCH_PY) -m pip install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/tbscope-*.whl
	$(TORCH_PY) -m pip install --quiet $(WHEEL_DIR)/tbscope-*.whl -c constraints.txt -c constraints-torch.txt
	$(TORCH_PY) -m pytest -q tests/torch

bench: build chromium
	$(PY) bench/run.py
	$(PY) bench/writer.py
	$(PY) bench/dashboard.py
	$(PY) bench/serve.py
	$(PY) bench/crafted.py
	$(PY) bench/remote.py

# The fuzz targets as plain binaries on stable Rust, 25 s each, seeded with event files from
# tensorboardX's and TensorBoard's writers (and ../shared/data/wild when it is there). Built
# into the main target directory with the same release profile, so `make build`'s
# dependencies are reused.
FUZZ_SEEDS := build/fuzz-seeds
FUZZ_SECONDS ?= 25
fuzz-smoke: $(VENV_STAMP)
	$(PY) crates/tbscope-core/fuzz/seeds.py $(FUZZ_SEEDS)
	cd crates/tbscope-core/fuzz && CARGO_TARGET_DIR=$(CURDIR)/target cargo build --release --quiet --no-default-features --bins
	target/release/tf_record --seconds $(FUZZ_SECONDS) --seeds $(FUZZ_SEEDS) $(addprefix --seeds ,$(wildcard ../shared/data/wild))
	target/release/event_file --seconds $(FUZZ_SECONDS) --seeds $(FUZZ_SEEDS) $(addprefix --seeds ,$(wildcard ../shared/data/wild))

# libFuzzer needs nightly Rust and cargo-fuzz; see crates/tbscope-core/fuzz/README.md for the
# stable-Rust fallback (the same targets as plain binaries).
fuzz:
	cargo install cargo-fuzz --locked --quiet
	cd crates/tbscope-core && cargo +nightly fuzz run tf_record -- -max_total_time=60
	cd crates/tbscope-core && cargo +nightly fuzz run event_file -- -max_total_time=60

clean:
	rm -rf target $(WHEEL_DIR) build .venv demo-logdir python/tbscope/server/static web/node_modules
