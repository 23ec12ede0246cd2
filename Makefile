# simdev: the two commands of the README, and the steps under them.
#
#   make demo    set up, then run the main example
#   make test    set up, then run every test (C unit tests, conformance
#                harness, both under valgrind and built with ASan+UBSan too,
#                the fuzz target, and the TensorFlow suite, whose
#                test_wheel.py builds the wheel from a clean clone of HEAD
#                with pip's defaults: it needs the network)
#   make bench   set up, then run every benchmark side by side with its
#                reference; writes docs/benchmarks.{md,json,png}
#                (BENCH_ARGS=--quick for a one-minute smoke pass)
#
# Set-up is idempotent and quick when already done: apt packages (only the
# missing ones), .venv with every package at requirements.lock's version
# (redone when requirements.txt or the lock changes), the CMake build in build/ (its configure step
# builds jemalloc for simdev once, into .deps/), and `pip install` of the
# plugin into .venv (redone when sources change).
#
# The steps, for the edit-build-test loop:
#   make build     configure (once) and build build/: libsimdev.so, the C
#                  tests, the benchmarks
#   make install   build the wheel and pip-install it into .venv: what
#                  pytest and the examples use (tests/tf test the INSTALLED
#                  copy, so run this after editing C code)
#   make test-c    set up, then ctest (C tests, valgrind runs)
#   make test-tf   set up, then pytest tests/tf tests/conformance tests/jax
#                  (PYTEST_ARGS)
#   make test-helgrind-variables  the variable kernels from several threads
#                  under helgrind, in make matrix's TF 2.18.1 venv (not part
#                  of make test: one helgrind run, minutes long)
#   make install-asan  install a plugin built with ASan+UBSan into .venv, to
#                  run TF scripts under AddressSanitizer (docs/debugging.md);
#                  `make install` puts the normal one back
#
# Every step fails on the first error: recipes run under bash with pipefail,
# and no output is filtered through a command that could hide a failure.

SHELL   := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# A recipe that fails leaves no half-made target that looks done.
.DELETE_ON_ERROR:

PYTHON  ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
BUILD   := build
# tests/conformance: the harness ships in the wheel (its plugins/ do not).
SOURCES := $(shell find src python -type f -not -path '*/__pycache__/*' 2>/dev/null) \
           $(wildcard tests/conformance/*.[ch] tests/conformance/CMakeLists.txt) \
           CMakeLists.txt pyproject.toml scripts/build-jemalloc.sh

.PHONY: all setup system build install install-asan demo test test-c test-tf test-mutation bench clean
.PHONY: sweep matrix test-helgrind-variables

all: setup

setup: system $(VENV)/.stamp build install

system:
	@bash scripts/setup-system.sh

# requirements.lock pins every package of the venv, transitive ones too
# (scripts/pylock.py: how it is written and checked); pip first, at its
# pinned version; `sync` removes what an older lock left and checks.
$(VENV)/.stamp: requirements.txt requirements.lock scripts/pylock.py
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q "$$(grep -E '^pip==' requirements.lock)"
	$(VPY) -m pip install -q -r requirements.lock
	$(VPY) scripts/pylock.py sync
	touch $@

# build/Makefile is written last by a configure that succeeded (redone when
# this Makefile, with its cmake options, changes). TensorFlow is required
# here: without it CMake would quietly build device_sim only.
$(BUILD)/Makefile: $(VENV)/.stamp Makefile
	cmake -S . -B $(BUILD) --log-level=NOTICE -DSIMDEV_BUILD_TESTS=ON \
	  -DSIMDEV_REQUIRE_TF=ON -DPython3_EXECUTABLE=$(abspath $(VPY))

# Progress lines are dropped from the output (awk never fails the pipe);
# compiler messages go to stderr and are all shown.
build: $(BUILD)/Makefile
	cmake --build $(BUILD) -j2 -- --no-print-directory \
	  | awk '!/^\[|^Consolidate|^Scanning|^Built target/ { print; fflush() }'

# The plugin as users get it: a wheel built by scikit-build-core (in
# build/wheel), installed into the venv; libsimdev.so lands in
# site-packages/tensorflow-plugins/. --no-build-isolation reuses .venv's
# TensorFlow instead of installing one into a temporary build environment
# (tests/tf/test_wheel.py builds the way users do, with isolation).
install: .stamps/installed
.stamps/installed: $(SOURCES) $(VENV)/.stamp
	$(VPY) -m pip install -q --no-build-isolation --no-deps .
	@mkdir -p .stamps && touch $@

# The same wheel built with -DSIMDEV_SANITIZE=ON (ASan+UBSan, -O1, debug
# info) in its own build tree, installed over the normal plugin: only for
# running TF scripts under AddressSanitizer (docs/debugging.md says how:
# python needs libasan preloaded). It drops the install stamp, so the next
# `make install` reinstalls the normal plugin.
install-asan: $(VENV)/.stamp
	rm -f .stamps/installed
	$(VPY) -m pip install -q --no-build-isolation --no-deps \
	  -C build-dir=$(BUILD)/wheel-asan -C cmake.build-type=Debug \
	  -C cmake.define.SIMDEV_SANITIZE=ON .

demo: setup
	$(VPY) examples/demo.py

test-c: setup
	ctest --test-dir $(BUILD) --output-on-failure --no-tests=error -j2

# Two pytest workers (pytest-xdist), one test file per worker at a time:
# most of a TF test's time is a child process importing TensorFlow, single-
# threaded, so two files at once use both cores; files stay whole so that a
# module's fixtures and its TF children are not duplicated across workers.
# --no-loadscope-reorder: files in the order given below (xdist otherwise
# sorts them by test count, which put the one-test test_kernel_coverage.py,
# four minutes long, last, with the other worker idle meanwhile).
PYTEST_ARGS ?= -q -n 2 --dist loadfile --no-loadscope-reorder
# The longest files first, so that neither worker is left with one of them
# at the end (files named one by one: given a directory, pytest collects in
# name order).
# test_valgrind.py: one TF script under memcheck, several minutes, mostly
# one core. test_release_lane.py: TF 2.18.1's venv (make matrix's, under
# .matrix/), simdev built for it, its variable-kernel tests; about three
# minutes, mostly one core.
PYTEST_SLOW  := tests/tf/test_valgrind.py tests/tf/test_release_lane.py \
                tests/tf/test_kernel_coverage.py tests/tf/test_wheel.py \
                tests/tf/test_models.py tests/tf/test_bench_smoke.py
PYTEST_FILES := $(PYTEST_SLOW) \
                $(filter-out $(PYTEST_SLOW),$(sort $(wildcard tests/tf/test_*.py))) \
                tests/conformance \
                tests/jax

test-tf: setup
	$(VPY) -m pytest $(PYTEST_FILES) $(PYTEST_ARGS)

# Per-op mutation check (about 30 min): each kernel left out in turn must
# make some test fail. make test runs the cheaper test_kernel_coverage.py.
test-mutation: setup
	$(VPY) tests/tf/kernel_mutation.py

test: setup
	ctest --test-dir $(BUILD) --output-on-failure --no-tests=error -j2
	$(VPY) -m pytest $(PYTEST_FILES) $(PYTEST_ARGS)

# The registration sweep (tests/sweep/sweep.py): every SIMDEV op and dtype
# combination against TF CPU (Eigen's kernels, in a child process), bad
# inputs, the registry rules, docs/kernels.md up to date. SWEEP_ARGS=
# --write-docs regenerates docs/kernels.md and docs/kernel-errors.md;
# --cpu-onednn also lists where oneDNN's CPU kernels differ from Eigen's;
# make test runs the quick form (tests/tf/test_sweep.py).
SWEEP_ARGS ?=
sweep: setup
	$(VPY) tests/sweep/sweep.py $(SWEEP_ARGS)

# simdev on every TensorFlow release it builds against (scripts/matrix.py):
# a cached venv per release under .matrix/, `pip install .`, the harness,
# the quick sweep, the demo, one Keras application; writes
# docs/tf-releases.md with the C API drift report. MATRIX_ARGS=--releases
# 2.18.1,2.21.0 runs fewer. Long the first time (six TF downloads, six
# builds); not part of make test.
MATRIX_ARGS ?=
matrix: system
	python3 scripts/matrix.py $(MATRIX_ARGS)

# tests/tf/test_variables_helgrind.py: simdev's variable kernels from
# several threads under helgrind (issue 28). One helgrind run of TF, about
# ten minutes, so make test leaves it out (it skips without
# SIMDEV_SLOW_TESTS=1). It runs in make matrix's TF 2.18.1 venv (.matrix/,
# the release whose libtensorflow_framework exports the variable helpers),
# made or brought in step with its lock and given this checkout's simdev by
# matrix.py's own venv and builds steps (logs in .matrix/tf-2.18.1/).
HELGRIND_RELEASE := 2.18.1
test-helgrind-variables: system
	python3 -c 'import sys; sys.path.insert(0, "scripts"); import matrix; \
	  r = matrix.Release("$(HELGRIND_RELEASE)"); \
	  sys.exit(0 if all(r.step(s, getattr(r, s)) for s in ("venv", "builds")) else 1)'
	env -u VIRTUAL_ENV -u PYTHONPATH -u TF_PLUGGABLE_DEVICE_LIBRARY_PATH SIMDEV_SLOW_TESTS=1 \
	  .matrix/tf-$(HELGRIND_RELEASE)/bin/python -m pytest -p no:cacheprovider -q -rs -s \
	  tests/tf/test_variables_helgrind.py

BENCH_ARGS ?=
bench: setup
	$(VPY) bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) .stamps
