# strata: build, test and demo. Everything installs itself; caches live outside the clone
# (~/.cache/strata) so repeated runs, and CI right after a session, build warm.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
CACHE ?= $(HOME)/.cache/strata
VENV ?= $(CACHE)/venv
BIN := $(VENV)/bin
export CARGO_TARGET_DIR ?= $(CACHE)/target
export VIRTUAL_ENV := $(VENV)
export PATH := $(BIN):$(HOME)/.cargo/bin:$(PATH)
# Two pinned sets: requirements.lock (what strata needs to run, and maturin) for `make demo`,
# requirements-dev.lock (that and the tests' peers and tools) for everything else.
RUN_HASH := $(shell cat requirements.lock 2>/dev/null | sha256sum | cut -c1-16)
DEV_HASH := $(shell cat requirements.lock requirements-dev.lock 2>/dev/null | sha256sum | cut -c1-16)
RUN_STAMP := $(VENV)/.installed-run-$(RUN_HASH)
MATURIN_PIN := $(shell grep -i '^maturin==' requirements.lock)
MATURIN_STAMP := $(VENV)/.installed-maturin-$(subst ==,-,$(MATURIN_PIN))
VENV_STAMP := $(VENV)/.installed-dev-$(DEV_HASH)
DATA ?=

.PHONY: help sysdeps sysdeps-build setup setup-run build capi header cbindgen build-release check-features test test-rust test-python check fmt lint deny demo bench clean fuzz fuzz-smoke fuzz-server crash races corrupt

help:
	@echo "make demo    set up everything and import + query a real dataset (DATA=file.nc to choose)"
	@echo "make test    set up everything and run the Rust and Python test suites"
	@echo "make check   test + rustfmt + clippy -D warnings + ruff + cargo-deny licenses"
	@echo "make bench   run the benchmarks in bench/ (release build)"
	@echo "make capi    build libstrata.so, the C API (make test and make bench build it too)"
	@echo "make fuzz    fuzz every decoder FUZZ_SECONDS each (FUZZ_TARGETS=... for some)"
	@echo "make fuzz-server  fuzz HTTP requests to the server and SQL against DataFusion, FUZZ_SECONDS each"
	@echo "                 (FUZZ_SERVER_TARGETS=server_request or sql_query for one)"
	@echo "make crash   1,000 kills of writing processes, each store checked after"
	@echo "make races   1,000 races of two appending processes: none lost or doubled"
	@echo "make corrupt every bit flip and truncation of every file of a store, each read back"

# System packages from Debian, only if missing. To build: a C compiler (zstd-sys), cmake
# and libclang (zfp-sys builds the bundled zfp and generates its bindings), venv support.
sysdeps-build:
	@command -v cc >/dev/null && command -v cmake >/dev/null && ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 \
	  && $(PYTHON) -c "import venv, ensurepip" 2>/dev/null || { \
	  echo "installing system packages (build)"; \
	  apt-get update -qq && apt-get install -y -qq build-essential cmake libclang-dev python3-venv >/dev/null; }
	@command -v cargo >/dev/null || { echo "error: cargo (Rust toolchain) is required" >&2; exit 1; }

# For the tests too: netCDF's ncdump (a real DAP2 client the server's tests use), chromium
# with its driver (the web page's test drives it headless; no browser is downloaded), Open
# MPI (the parallel writers' tests run under mpirun; mpi4py's wheel loads Debian's libmpi),
# gfortran (the C API's Fortran example is built and run in the tests) and curl (docs/server.md's
# command lines are run as written).
sysdeps: sysdeps-build
	@command -v ncdump >/dev/null && command -v chromium >/dev/null && command -v chromedriver >/dev/null \
	  && command -v mpirun >/dev/null && ls /usr/lib/*/libmpi.so >/dev/null 2>&1 && command -v gfortran >/dev/null \
	  && command -v curl >/dev/null || { \
	  echo "installing system packages (tests)"; \
	  apt-get update -qq && apt-get install -y -qq netcdf-bin chromium chromium-driver openmpi-bin libopenmpi-dev \
	    gfortran curl >/dev/null; }

# maturin first, alone: `build` compiles the extension with it while pip installs the rest.
$(MATURIN_STAMP): | sysdeps-build
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(MATURIN_PIN)
	@rm -f $(VENV)/.installed-maturin-*; touch $@

$(RUN_STAMP): $(MATURIN_STAMP)
	$(BIN)/python -m pip install -q -r requirements.lock
	@rm -f $(VENV)/.installed-run-*; touch $@

# The run set's versions bind the dev set (-c): the two locks cannot drift apart.
$(VENV_STAMP): $(RUN_STAMP) | sysdeps
	$(BIN)/python -m pip install -q -r requirements-dev.lock -c requirements.lock
	@rm -f $(VENV)/.installed-dev-*; touch $@

setup-run: $(RUN_STAMP)

setup: $(VENV_STAMP)

# One release build serves `make demo`, `make test` and `make bench`: the Rust tests are
# built with --release too, and crates/strata-workspace-hack gives both builds the same
# dependency features, so DataFusion compiles once (see check-features). Cargo prints each
# crate as it compiles: a cold build takes a while and shows it. On a fresh machine pip
# downloads and installs requirements.lock (network and disk, most of a minute) beside the
# compile (CPU, minutes): the extension is built in place first, installed once both are done.
build: $(MATURIN_STAMP)
	@echo "building the extension (release; a cold build compiles DataFusion, several minutes)"
	@$(MAKE) --no-print-directory setup-run & setup=$$!; \
	  $(BIN)/maturin develop --release --skip-install -m python/Cargo.toml; built=$$?; \
	  wait $$setup && exit $$built
	$(BIN)/maturin develop --release -m python/Cargo.toml

# libstrata.so, the C API (crates/strata-capi/include/strata.h): the tests and benchmarks
# use it, the demo does not.
capi: setup-run
	@echo "building libstrata.so, the C API (crates/strata-capi/include/strata.h)"
	cargo build --release -p strata-capi

# strata.h is generated from crates/strata-capi by cbindgen (`make lint` checks it is current).
header: cbindgen
	cbindgen -q --config crates/strata-capi/cbindgen.toml --crate strata-capi \
	  --output crates/strata-capi/include/strata.h crates/strata-capi

cbindgen:
	@command -v cbindgen >/dev/null || cargo install -q --locked cbindgen

build-release: build

test-rust: setup
	cargo test --release --workspace --exclude strata-python

# The extension build and the test build must resolve every shared dependency with the same
# features (else DataFusion compiles twice): lists what differs, and fails if anything does.
check-features:
	@mkdir -p $(CACHE)
	@cargo tree -p strata-python -e normal,build -f '{p} {f}' --prefix none | sed 's/ (\*)$$//' \
	  | sort -u > $(CACHE)/features-ext.txt
	@cargo tree --workspace --exclude strata-python -e normal,build,dev -f '{p} {f}' --prefix none \
	  | sed 's/ (\*)$$//' | sort -u > $(CACHE)/features-test.txt
	@cut -d' ' -f1,2 $(CACHE)/features-ext.txt | sort -u > $(CACHE)/crates-ext.txt
	@cut -d' ' -f1,2 $(CACHE)/features-test.txt | sort -u > $(CACHE)/crates-test.txt
	@comm -12 $(CACHE)/crates-ext.txt $(CACHE)/crates-test.txt > $(CACHE)/crates-both.txt
	@diff <(grep -Ff $(CACHE)/crates-both.txt $(CACHE)/features-ext.txt | sort -u) \
	      <(grep -Ff $(CACHE)/crates-both.txt $(CACHE)/features-test.txt | sort -u) \
	  || { echo "error: shared dependencies differ in features: pin them in crates/strata-workspace-hack" >&2; exit 1; }

test-python: setup build capi
	$(BIN)/python -m pytest -q tests/python

# The decoders' fuzz targets run here on seeds and mutations (crates/strata-fuzz-targets, on
# the release build the tests share); libFuzzer runs them in `make fuzz-smoke`, which needs a
# nightly sanitizer build of its own (about 7 minutes cold on 2 cores): `make check` and the
# CI run it, `make test` does not wait for it.
test: test-rust test-python

# A short run of every fuzz target under libFuzzer, so CI catches decoder panics that the
# mutations miss (make fuzz runs longer).
fuzz-smoke:
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=10 FUZZ_RECORD=

fmt:
	cargo fmt --all
	$(BIN)/ruff format python tests bench examples fuzz
	$(BIN)/ruff check --fix python tests bench examples fuzz

lint: setup check-features cbindgen
	cargo fmt --all --check
	@echo "clippy (a cold run checks every dependency first, each crate shown)"
	cargo clippy --workspace --all-targets -- -D warnings
	@echo "rustdoc: every doc link resolves, and public items' docs link only public items"
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
	$(BIN)/ruff check python tests bench examples fuzz
	cbindgen -q --verify --config crates/strata-capi/cbindgen.toml --crate strata-capi \
	  --output crates/strata-capi/include/strata.h crates/strata-capi \
	  || { echo "strata.h is out of date: run make header" >&2; exit 1; }

deny: setup
	@command -v cargo-deny >/dev/null || cargo install -q --locked cargo-deny
	cargo deny check licenses bans sources

check: test fuzz-smoke lint deny

demo: build-release
	$(BIN)/python examples/demo.py $(DATA)

bench: setup build capi
	$(BIN)/python bench/bench_hyperslab.py
	$(BIN)/python bench/bench_codecs.py
	$(BIN)/python bench/bench_import.py
	$(BIN)/python bench/bench_small.py
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_boxes.py
	$(BIN)/python bench/bench_overlap.py
	$(BIN)/python bench/bench_precision.py
	$(BIN)/python bench/bench_values.py
	$(BIN)/python bench/bench_sql.py
	$(BIN)/python bench/bench_area.py
	$(BIN)/python bench/bench_write.py
	@command -v nginx >/dev/null || apt-get install -y -qq nginx-light >/dev/null
	$(BIN)/python bench/bench_server.py

# 1,000 SIGKILLs of appending and garbage-collecting processes, each followed by a full
# check of the store (make test runs two dozen).
crash: setup build
	$(BIN)/python tests/crash/harness.py --kills 1000

# 1,000 races of two processes appending to one store at once (make test runs a few).
races: setup build
	$(BIN)/python tests/crash/races.py --races 1000

# Every single-bit flip and truncation of every file of a small store (make test samples them).
corrupt: setup build
	$(BIN)/python tests/crash/corrupt.py

clean:
	rm -rf demo-out bench/work .pytest_cache

# Fuzz every decoder for FUZZ_SECONDS each (cargo-fuzz; libFuzzer needs nightly-only flags,
# which RUSTC_BOOTSTRAP enables on the stable toolchain).
FUZZ_SECONDS ?= 60
# One target per file of fuzz/fuzz_targets (crates/strata-fuzz-targets checks that its
# TARGETS name the same set).
FUZZ_TARGETS := $(sort $(basename $(notdir $(wildcard fuzz/fuzz_targets/*.rs))))
FUZZ_SERVER_TARGETS ?= server_request sql_query
# `make fuzz` records each target's executions (libFuzzer's "Done N runs") and crashes in
# FUZZ_RECORD; the CI smoke run records nothing. The corpus in fuzz/corpus carries over, and
# every target's starts from its seeds (crates/strata-fuzz-targets/src/seeds.rs).
FUZZ_RECORD ?= bench/results/fuzz.md
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install -q --locked cargo-fuzz
	@mkdir -p $(CACHE)/fuzz-logs
	STRATA_SEEDS_OUT=$(CURDIR)/fuzz/corpus cargo test --release -q -p strata-fuzz-targets --test seeds_and_mutations write_seeds
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  RUSTC_BOOTSTRAP=1 cargo fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 \
	    -print_final_stats=0 2>&1 | tee $(CACHE)/fuzz-logs/$$t.log | grep -E "^(Done|==|SUMMARY)|panicked|ERROR" ; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; done
	@if [ -n "$(FUZZ_RECORD)" ]; then \
	  $(BIN)/python fuzz/record.py $(CACHE)/fuzz-logs $(FUZZ_RECORD) $(FUZZ_SECONDS) $(FUZZ_TARGETS); fi

# The server's request handling under libFuzzer: fuzz/server is a package of its own, as it
# compiles DataFusion, arrow and axum under the fuzzing flags (a quarter of an hour cold on
# 2 cores), which `make test`'s smoke run of the decoders should not pay. `make test` runs
# the same harness on mutated seeds (crates/strata-server/tests/request_mutations.rs), whose
# seeds start this corpus. They run without AddressSanitizer (-s none): safe Rust behind
# HTTP and SQL, where ASan cost 6x the executions (sql_query: 32 against 214 a second); the
# engine's unsafe code is fuzzed under ASan by the decoders' targets (`store`).
fuzz-server: setup
	@command -v cargo-fuzz >/dev/null || cargo install -q --locked cargo-fuzz
	@mkdir -p $(CACHE)/fuzz-logs
	STRATA_SEEDS_OUT=$(CURDIR)/fuzz/server/corpus/server_request \
	  cargo test --release -q -p strata-server --test request_mutations every_seed
	# Coverage on strata's crates only (fuzz/server/rustc-wrapper.sh); the cfg keeps these
	# builds apart from plain cargo-fuzz ones, whose artifacts the wrapper cannot be seen in.
	for t in $(FUZZ_SERVER_TARGETS); do \
	  RUSTC_WRAPPER=$(CURDIR)/fuzz/server/rustc-wrapper.sh RUSTFLAGS="--cfg strata_fuzz_wrapped" RUSTC_BOOTSTRAP=1 \
	  cargo fuzz run -s none --fuzz-dir fuzz/server $$t -- -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=2048 -print_final_stats=0 2>&1 | tee $(CACHE)/fuzz-logs/$$t.log \
	    | grep -E "^(Done|==|SUMMARY)|panicked|ERROR"; test $${PIPESTATUS[0]} -eq 0 || exit 1; done
	@if [ -n "$(FUZZ_RECORD)" ]; then \
	  $(BIN)/python fuzz/record.py $(CACHE)/fuzz-logs $(FUZZ_RECORD) $(FUZZ_SECONDS) $(FUZZ_SERVER_TARGETS); fi
