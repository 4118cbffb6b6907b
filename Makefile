# SPDX-License-Identifier: Apache-2.0
# Front door for the CMake build. `make demo` and `make test` work on a fresh Debian 12 machine.
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# SKIP_ASAN_COVERED=ON (.ci/run): the host build leaves out the tests that make test-asan runs in the same
# CI run (the unit tests but unit_minidump, the fuzz targets' seeds; tests/CMakeLists.txt).
SKIP_ASAN_COVERED ?= OFF
# The host build's optimization (the Release type's -O3 by default) and its benchmarks (BENCH=OFF:
# none, and so not bench_unwind_agreement, the test bench/unwind registers). .ci/run sets HOST_OPT=-O2:
# the product build's checks at the level Debian builds its packages with, for ~10 % less compile
# (doc/ci-plan.md C28).
HOST_OPT ?= -O3
BENCH ?= ON
HOST_OPT_FLAGS = -DCMAKE_C_FLAGS_RELEASE="$(HOST_OPT) -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="$(HOST_OPT) -DNDEBUG" \
  -DSTACKPROV_BUILD_BENCH=$(BENCH)

.PHONY: all deps configure build test test-sanitize asan-build test-asan tsan-build test-tsan fuzz fuzz-build fuzz-campaign random-walks demo bench install clean

all: build

deps:
	@./scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DSTACKPROV_SKIP_ASAN_COVERED=$(SKIP_ASAN_COVERED) $(HOST_OPT_FLAGS) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# ---- sanitizers: the unit and in-process tests and the fuzz targets' seeds and crash inputs built
# with ASan+UBSan (build-asan), and the unit
# tests of core, memory and unwind (the ones with threads sharing snapshots, modules and caches)
# with TSan (build-tsan). -O1 keeps the instrumented builds quick; no benchmarks.
# build-asan is also the libFuzzer build (make fuzz, doc/ci-plan.md C1): clang-14 with ASan+UBSan
# everywhere and -fsanitize=fuzzer-no-link on the library and the fuzz targets, so that the library
# is compiled once for both.
# In it the fuzz targets link libFuzzer's main, which runs file arguments once each (the fuzz_
# tests). Its ASan runtime is linked into each executable (clang), not libasan.so (gcc). The TSan build is
# clang-14 too (with lld): 210 CPU-s against g++'s 260 for the same targets (doc/ci-plan.md C17).
# The unit tests' own code at -O0 (STACKPROV_TEST_OPT): clang's ASan+UBSan at -O1 made each unit TU cost
# 3x (doc/ci-plan.md C13). The TSan build's library is -O0 too (TSAN_OPT): races are found at any level.
SAN_OPT ?= -O1
TSAN_OPT ?= -O0
# build-asan's cold library folders (the C ABI, the pipeline, traces, evidence, perf, runtime frames,
# minidumps: no test runs long in them) at -O0, the parsing and unwinding layers at SAN_OPT
# (CMake STACKPROV_COLD_OPT, doc/ci-plan.md C28). make fuzz configures its build (build-asan) the same
# way; the campaign's build (make fuzz-campaign) has neither this nor SAN_LIB_DEBUG: every folder at
# SAN_OPT with line tables, for speed and for reports with lines.
SAN_COLD_OPT ?= -O0
# The sanitizer builds' library without line tables when SAN_LIB_DEBUG=-g0 (.ci/run; CMake
# STACKPROV_SAN_LIB_DEBUG, doc/ci-plan.md C29): ~17 % less compile, reports name function + offset.
SAN_LIB_DEBUG ?=
SAN_CMAKE = cmake -S . -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTACKPROV_BUILD_BENCH=OFF -DSTACKPROV_UNITY=ON \
  -DSTACKPROV_TEST_OPT=-O0 $(CMAKE_FLAGS)
# FUZZ_COVERAGE=OFF (.ci/run): build-asan without libFuzzer's coverage counters (CMake
# STACKPROV_FUZZ_COVERAGE): ~115 CPU-s less; its fuzz targets run seeds (FUZZ_SECONDS=0) but do not fuzz.
FUZZ_COVERAGE ?= ON
ASAN_CMAKE_FLAGS = -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DSTACKPROV_SANITIZE=address,undefined -DSTACKPROV_FUZZ=ON -DSTACKPROV_FUZZ_COVERAGE=$(FUZZ_COVERAGE)
# A build-asan (before C1) or build-tsan (before C17) configured with g++ starts from a new cache: CMake's
# own reset on a compiler change would first stop at STACKPROV_FUZZ's clang check, failing one configure.
asan_fresh = if [ -f $(1)/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang' $(1)/CMakeCache.txt; \
  then rm -rf $(1)/CMakeCache.txt $(1)/CMakeFiles; fi
ASAN_TESTS ?= ^(unit_|inprocess_|crash_inprocess_|fuzz_|provenance_fuzz_)
TSAN_TESTS ?= ^unit_(core|memory|unwind)$$

# test-sanitize = test-asan + test-tsan; .ci/run runs their builds and tests as separate steps
# (asan-build, tsan-build, and the ctest runs) to overlap builds with other stages' tests.
test-sanitize: test-asan test-tsan

asan-build: deps
	@$(call asan_fresh,build-asan)
	@$(SAN_CMAKE) -B build-asan -DCMAKE_C_FLAGS_RELEASE=$(SAN_OPT) -DCMAKE_CXX_FLAGS_RELEASE=$(SAN_OPT) \
	  -DSTACKPROV_COLD_OPT="$(SAN_COLD_OPT)" -DSTACKPROV_SAN_LIB_DEBUG="$(SAN_LIB_DEBUG)" $(ASAN_CMAKE_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS) --target sanitize_tests

test-asan: asan-build
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(ASAN_TESTS)'

tsan-build:
	@$(call asan_fresh,build-tsan)
	@$(SAN_CMAKE) -B build-tsan -DCMAKE_C_FLAGS_RELEASE=$(TSAN_OPT) -DCMAKE_CXX_FLAGS_RELEASE=$(TSAN_OPT) \
	  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
	  -DSTACKPROV_SANITIZE=thread -DSTACKPROV_TRACE=OFF -DSTACKPROV_SAN_LIB_DEBUG="$(SAN_LIB_DEBUG)" >/dev/null
	cmake --build build-tsan -j $(JOBS) --target unit_core unit_memory unit_unwind

test-tsan: tsan-build
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

# ---- libFuzzer (issue 18): every tests/fuzz target built with clang-14 and
# -fsanitize=fuzzer,address,undefined in build-asan (the sanitizer build above: after
# make test-sanitize, fuzz-build has nothing left to compile), then run FUZZ_SECONDS each on seeds cut
# from real files (scripts/fuzz.sh; FUZZ_TARGETS=<names> for a subset). The seeds are made with the
# CLI of the g++ build (the CLI does not build with clang-14). A crash fails the run; its input goes
# to tests/fuzz/regress/<target>/, which `make test` replays with the g++ build and
# `make test-sanitize` with the libFuzzer build.
FUZZ_BUILD ?= build-asan
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
# Random walks: FUZZ_WALKS unwinds over random stacks and registers against these modules, in the
# instrumented build (tests/fuzz/random_walks.cpp; `make random-walks` runs them in $(BUILD)).
FUZZ_WALKS ?= 1000000
WALK_MODULES = /usr/lib/x86_64-linux-gnu/libc.so.6 /usr/bin/python3.11 /usr/bin/node
# FUZZ_COLD_OPT, FUZZ_LIB_DEBUG: the fuzz build's STACKPROV_COLD_OPT and STACKPROV_SAN_LIB_DEBUG, passed
# every time so that no earlier configure's value sticks (make fuzz: build-asan's own; the campaign: none).
FUZZ_COLD_OPT ?= $(SAN_COLD_OPT)
FUZZ_LIB_DEBUG ?= $(SAN_LIB_DEBUG)
fuzz-build: build
	@$(call asan_fresh,$(FUZZ_BUILD))
	@$(SAN_CMAKE) -B $(FUZZ_BUILD) -DCMAKE_C_FLAGS_RELEASE=$(SAN_OPT) -DCMAKE_CXX_FLAGS_RELEASE=$(SAN_OPT) \
	  -DSTACKPROV_COLD_OPT="$(FUZZ_COLD_OPT)" -DSTACKPROV_SAN_LIB_DEBUG="$(FUZZ_LIB_DEBUG)" $(ASAN_CMAKE_FLAGS) >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets

# $(call fuzz_coverage,WHAT,SECONDS): stops when WHAT would fuzz a build without coverage counters.
fuzz_coverage = if [ "$(FUZZ_COVERAGE)" != ON ] && [ "$(2)" != 0 ]; then \
  echo "make $(1): $(2) s of fuzzing with FUZZ_COVERAGE=$(FUZZ_COVERAGE): a build without coverage counters cannot fuzz: FUZZ_COVERAGE=ON (the default) builds them; make fuzz FUZZ_SECONDS=0 runs every seed once without" >&2; \
  exit 2; fi
fuzz:
	@$(call fuzz_coverage,fuzz,$(FUZZ_SECONDS))
	@$(MAKE) --no-print-directory fuzz-build
	FUZZ_JOBS=$(JOBS) FUZZ_CLI=$(BUILD)/bin/stackprov ./scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 ./$(FUZZ_BUILD)/bin/random_walks $(FUZZ_WALKS) 18 $(WALK_MODULES)

# The campaign (doc/hardening.md): rounds of fuzz.sh until every target has used FUZZ_GOAL CPU
# seconds, resumable (ledger $(FUZZ_BUILD)/fuzz/campaign.tsv; a new ledger starts from the rounds
# committed in doc/fuzz-campaign.tsv, FUZZ_CARRIED= starts from nothing). Runs niced: it yields to other work.
# FUZZ_TARGETS="pe_object pdb" runs the campaign for those targets only.
FUZZ_GOAL ?= 3600
FUZZ_ROUND ?= 1200
fuzz-campaign:
	@$(call fuzz_coverage,fuzz-campaign,$(FUZZ_GOAL))
	@$(MAKE) --no-print-directory fuzz-build FUZZ_COLD_OPT= FUZZ_LIB_DEBUG=
	FUZZ_JOBS=$(JOBS) FUZZ_CLI=$(BUILD)/bin/stackprov FUZZ_TARGETS="$(FUZZ_TARGETS)" nice -n 19 ./scripts/fuzz-campaign.sh $(FUZZ_BUILD) $(FUZZ_GOAL) $(FUZZ_ROUND)

random-walks: build
	cmake --build $(BUILD) --target random_walks
	./$(BUILD)/bin/random_walks $(FUZZ_WALKS) 18 $(WALK_MODULES)

demo: build
	@./$(BUILD)/bin/stackprov demo

bench: build
	cmake --build $(BUILD) --target bench_all -j $(JOBS)
	./scripts/run-bench.sh $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)

# ---- cross build (issue 7): make cross ARCH=arm64|mips32|mips32el|win64 -> build-cross-<arch>.
# The target's -dev packages are unpacked into build-cross-<arch>/sysroot (apt-get download,
# nothing installed on the host); tests run under qemu-user via CMAKE_CROSSCOMPILING_EMULATOR.
# mips32 (big-endian) has no Debian 12 packages: fetch-sysroot.sh stops with exit 2.
ARCH ?= arm64
CROSS_TRIPLE_arm64 := aarch64-linux-gnu
CROSS_TRIPLE_mips32 := mips-linux-gnu
CROSS_TRIPLE_mips32el := mipsel-linux-gnu
CROSS_DEBARCH_arm64 := arm64
CROSS_DEBARCH_mips32 := mips
CROSS_DEBARCH_mips32el := mipsel
CROSS_BUILD := build-cross-$(ARCH)
# -O0 (library and unit tests) and one unity TU per lib/ folder (STACKPROV_UNITY, doc/ci-plan.md C7):
# the cross builds check the arch code under qemu, the -O3 product build is checked on the host
# (doc/ci-plan.md C5, C13: an arm64 library TU costs 6.8 CPU-s at -O0, 9.4 at -O1). The fixtures keep
# their own -O2 (target options come after these).
CROSS_OPT ?= -O0
CROSS_TARGETS ?= stackprov cross_inprocess_static cross_inprocess_dynamic crash_fixture unit_dwarf unit_unwind unit_core unit_arch
CROSS_TESTS ?= ^(cross_inprocess_|crash_inprocess_|unit_(dwarf|unwind|core|arch)$$)

# ARCH=win64 (issue 33): mingw-w64 (g++-mingw-w64-x86-64, no sysroot to fetch) builds the win64 subset
# of the library (cmake/win64.cmake, doc/windows.md "The win64 build") and its tests, run under wine.
# Its C++ is compiled by clang-14 against mingw's libstdc++ (doc/ci-plan.md C21; STACKPROV_CROSS_CXX=gcc:
# the mingw g++), as the other cross builds' (C18).
CROSS_TRIPLE_win64 := x86_64-w64-mingw32
CROSS_SYSROOT_FLAG := -DSTACKPROV_CROSS_SYSROOT=$(CURDIR)/$(CROSS_BUILD)/sysroot
CROSS_TEST_OPT_FLAG := -DSTACKPROV_TEST_OPT=$(CROSS_OPT)
ifeq ($(ARCH),win64)
CROSS_TARGETS := all
CROSS_TESTS := .
CROSS_SYSROOT_FLAG :=
CROSS_TEST_OPT_FLAG :=
endif

.PHONY: cross test-cross
cross:
	@test -n "$(CROSS_TRIPLE_$(ARCH))" || { echo "ARCH must be arm64, mips32, mips32el or win64"; exit 2; }
	@if [ "$(ARCH)" != win64 ]; then ./cmake/toolchains/fetch-sysroot.sh $(CROSS_DEBARCH_$(ARCH)) $(CURDIR)/$(CROSS_BUILD)/sysroot; fi
	@cmake -S . -B $(CROSS_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/toolchains/$(CROSS_TRIPLE_$(ARCH)).cmake \
	  $(CROSS_SYSROOT_FLAG) -DSTACKPROV_BUILD_BENCH=OFF -DSTACKPROV_UNITY=ON \
	  -DCMAKE_C_FLAGS_RELEASE=$(CROSS_OPT) -DCMAKE_CXX_FLAGS_RELEASE=$(CROSS_OPT) $(CROSS_TEST_OPT_FLAG) \
	  $(CMAKE_FLAGS) >/dev/null
	cmake --build $(CROSS_BUILD) -j $(JOBS) --target $(CROSS_TARGETS)

test-cross: cross
	cd $(CROSS_BUILD) && ctest --output-on-failure -j $(JOBS) -R '$(CROSS_TESTS)'
