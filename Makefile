# simdev: the two commands of the README, and the steps under them.
#
#   make demo    set up, then run the main example
#   make test    set up, then run every test (C unit tests, conformance
#                harness, both under valgrind too, and the TensorFlow suite)
#   make bench   set up, then run every benchmark side by side with its
#                reference; writes docs/benchmarks.{md,json,png}
#                (BENCH_ARGS=--quick for a one-minute smoke pass)
#
# Set-up is idempotent and quick when already done: apt packages (only the
# missing ones), jemalloc for simdev (built once into .deps/), .venv with the
# pinned requirements (rebuilt when requirements.txt changes), the CMake
# build, and `pip install` of the plugin into .venv (redone when sources
# change).

PYTHON  ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
BUILD   := build
JEMALLOC_STAMP := .deps/jemalloc/.simdev-jemalloc-5.3.0-2
SOURCES := $(shell find src python -type f 2>/dev/null) CMakeLists.txt pyproject.toml
PLUGIN  := $(VENV)/lib/python3.11/site-packages/tensorflow-plugins/libsimdev.so

.PHONY: all setup system build install demo test test-c test-tf bench clean

all: setup

setup: system $(JEMALLOC_STAMP) $(VENV)/.stamp build install

system:
	@bash scripts/setup-system.sh

$(JEMALLOC_STAMP): scripts/build-jemalloc.sh
	bash scripts/build-jemalloc.sh

$(VENV)/.stamp: requirements.txt
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements.txt
	touch $@

$(BUILD)/CMakeCache.txt: $(VENV)/.stamp
	cmake -S . -B $(BUILD) -DSIMDEV_BUILD_TESTS=ON -DPython3_EXECUTABLE=$(abspath $(VPY)) >/dev/null

build: $(BUILD)/CMakeCache.txt $(JEMALLOC_STAMP)
	@cmake --build $(BUILD) -j2 -- --no-print-directory | grep -vE '^\[|^Consolidate|^Scanning|^Built target' || true
	@test -f $(BUILD)/libsimdev.so

# The plugin as users get it: a wheel built by scikit-build-core, installed
# into the venv; libsimdev.so lands in site-packages/tensorflow-plugins/.
install: .stamps/installed
.stamps/installed: $(SOURCES) $(VENV)/.stamp $(JEMALLOC_STAMP)
	$(VPY) -m pip install -q --no-build-isolation --no-deps .
	@mkdir -p .stamps && touch $@

demo: setup
	$(VPY) examples/demo.py

test-c: setup
	ctest --test-dir $(BUILD) --output-on-failure --no-tests=error -j2

test-tf: setup
	$(VPY) -m pytest tests/tf -q

test: setup
	ctest --test-dir $(BUILD) --output-on-failure --no-tests=error -j2
	$(VPY) -m pytest tests/tf -q

BENCH_ARGS ?=
bench: setup
	$(VPY) bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) .stamps
