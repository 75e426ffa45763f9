# jupyter-agent: one binary, six layers, each a static library.
#
#   make            build build/jupyter-agent
#   make test       install missing Debian packages, build, run every suite
#   make test-cgroup2  only the cgroup v2 suite (Debian's kernel under qemu)
#   make demo       install missing packages, build, run the finance demo
#                   (its notebook goes to build/demo/)
#   make demo-notebook  replay the demo into the committed
#                   examples/notebooks/quarterly-variance.ipynb (on purpose)
#   make asan       build with ASan+UBSan into build-asan/ and run the C suites
#   make fuzz       build libFuzzer targets (clang) into build-fuzz/
#   make install    PREFIX=/usr/local DESTDIR=
#   make format     clang-format -i every C file;  make format-check
#   make bench      benchmarks against the Python reference stack
#
# The Debian packages each target needs are listed in tools/packages.mk;
# CONTRIBUTING.md says how to add a test, a suite, a fuzz target, a benchmark.
#
# Sources are found by wildcard: a new .c file in a layer joins its library,
# a new tests/{unit,integration,security}/*.c file becomes a test program,
# and a new tests/fuzz/*.c file becomes a fuzz target replaying its corpus.

BUILD    ?= build
CC       ?= cc
PREFIX   ?= /usr/local
PYTHON   ?= /usr/bin/python3

include tools/packages.mk
PKGS     := $(PKG_MODULES)
WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wwrite-strings -Wformat=2 -Wvla -Werror
HARDEN   := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
OPT      ?= -O2 -g
SAN      ?=
CFLAGS   ?=
CFLAGS   += -std=c17 $(OPT) $(WARN) $(SAN) -MMD -MP
CPPFLAGS += -D_GNU_SOURCE -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDFLAGS  += $(SAN) -pie -Wl,-z,relro,-z,now
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

ifeq ($(SAN),)
CFLAGS   += $(HARDEN)
else
# Sanitizer builds also abort on a broken invariant (common/check.h).
CFLAGS   += -fPIE -DJA_NEVER_ABORTS
endif

# Link order: a layer may use only the layers after it (see docs/ARCHITECTURE.md).
# Each layer's sources are its *.c files and those one folder down.
LAYERS   := agent notebook-io packages kernel-bridge sandbox common
MAIN_SRC := agent/cli/main.c
lib_srcs  = $(filter-out $(MAIN_SRC),$(wildcard $(1)/*.c $(1)/*/*.c))
# Python that runs in kernels lives in *.py files next to the C that owns
# it; each is built into its layer as `const char NAME_py[]` (tools/embed).
py_srcs   = $(wildcard $(1)/*.py $(1)/*/*.py)
# Data the C reads at run time (the MCP tools' JSON Schemas) likewise: each
# *.json file in a layer is `const char NAME_json[]`.
json_srcs = $(wildcard $(1)/*.json $(1)/*/*.json)
lib_objs  = $(patsubst %.c,$(BUILD)/%.o,$(call lib_srcs,$(1))) \
            $(patsubst %.py,$(BUILD)/%.py.o,$(call py_srcs,$(1))) \
            $(patsubst %.json,$(BUILD)/%.json.o,$(call json_srcs,$(1))) \
            $(if $(filter sandbox,$(1)),$(BUILD)/sandbox/sb_drop.so.o)
LIBS     := $(foreach l,$(LAYERS),$(BUILD)/lib$(l).a)

BIN      := $(BUILD)/jupyter-agent
TEST_DIRS := unit integration security
TEST_SRCS := $(foreach d,$(TEST_DIRS),$(wildcard tests/$(d)/*.c))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
FUZZ_SRCS := $(filter-out tests/fuzz/replay_main.c,$(wildcard tests/fuzz/*.c))
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/tests/fuzz/%,$(FUZZ_SRCS))
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))

.PHONY: all deps deps-build deps-c test test-c test-cgroup2 demo demo-notebook \
        asan fuzz install uninstall format format-check clean bench

# PID 1 of the cgroup v2 test guest (tests/cgroup2/vm.sh): static, no SAN.
CG2_INIT := $(BUILD)/cgroup2/init

all: $(BIN) $(TEST_BINS) $(FUZZ_BINS) $(BENCH_BINS) $(CG2_INIT)

$(CG2_INIT): tests/cgroup2/init.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -O2 $(WARN) -D_GNU_SOURCE -static $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.py.c: %.py tools/embed
	@mkdir -p $(dir $@)
	sh tools/embed $(notdir $(basename $<))_py $< >$@.tmp && mv $@.tmp $@

$(BUILD)/%.py.o: $(BUILD)/%.py.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.json.c: %.json tools/embed
	@mkdir -p $(dir $@)
	sh tools/embed $(notdir $(basename $<))_json $< >$@.tmp && mv $@.tmp $@

$(BUILD)/%.json.o: $(BUILD)/%.json.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The privilege drop as a shared object the kernel factory loads with
# ctypes (sandbox/sb_drop.h), built into libsandbox. No sanitizer: it is
# loaded into Python, not into us.
$(BUILD)/sandbox/sb_drop.so: sandbox/sb_drop.c sandbox/sb_drop.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -std=c17 -O2 $(WARN) -fPIC -shared -Wl,-z,relro,-z,now \
	    $< -o $@

$(BUILD)/sandbox/sb_drop.so.c: $(BUILD)/sandbox/sb_drop.so tools/embed
	sh tools/embed sb_drop_so $< >$@.tmp && mv $@.tmp $@

$(BUILD)/sandbox/sb_drop.so.o: $(BUILD)/sandbox/sb_drop.so.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

define lib_rule
$(BUILD)/lib$(1).a: $(call lib_objs,$(1))
	@mkdir -p $$(dir $$@)
	rm -f $$@
	$$(AR) rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call lib_rule,$(l))))

$(BIN): $(BUILD)/agent/cli/main.o $(LIBS)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIBS)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/fuzz/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay_main.o $(LIBS)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBS)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# Install whatever Debian packages are missing (no-op when all are present):
# everything, or only what building (deps-build) or building and running
# the C suites (deps-c) needs.
deps:
	@sh tools/install-deps all

deps-build:
	@sh tools/install-deps build

deps-c:
	@sh tools/install-deps build c-suites

test: deps
	@$(MAKE) --no-print-directory -s all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) sh tests/run

# The C suites only (used by make asan, where the Python peers are not needed).
test-c: all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) SUITES="unit fuzz integration security" sh tests/run

# The cgroup v2 suite alone: Debian's kernel under qemu (tests/cgroup2/vm.sh).
test-cgroup2: deps
	@$(MAKE) --no-print-directory -s all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) SUITES=cgroup2 sh tests/run

demo: deps
	@$(MAKE) --no-print-directory -s $(BIN)
	@BUILD=$(BUILD) PYTHON=$(PYTHON) sh examples/demo.sh

# Regenerate the committed demo notebook (its timings change on every run).
demo-notebook: deps
	@$(MAKE) --no-print-directory -s $(BIN)
	@BUILD=$(BUILD) PYTHON=$(PYTHON) DEMO_REPLAY=1 \
	    DEMO_OUT=examples/notebooks/quarterly-variance.ipynb sh examples/demo.sh

# Left out of make asan for CI's time (make test runs them): the gVisor
# suites' minutes are runsc's (ptrace). The C they reach (sandbox/sb_gvisor*,
# the relay's host end) is then not run under ASan in CI: a known gap.
# mcp_http_slowloris: its SIGTERM check meets a known double free under ASan
# (detached MCP session threads run OpenSSL thread-local cleanup after exit
# cleanup); the fix, joining them, is on branch h-registry, not yet landed.
ASAN_SKIP ?= gvisor_* mcp_http_slowloris
asan: deps-c
	@SKIP="$(ASAN_SKIP)" $(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -g" \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    test-c

# libFuzzer builds (clang); each target runs for FUZZ_SECONDS on its corpus.
FUZZ_SECONDS ?= 60
fuzz: deps-build
	@sh tools/fuzz $(FUZZ_SECONDS)

bench: deps all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) sh bench/run

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/jupyter-agent

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/jupyter-agent

C_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(C_FILES)

format-check:
	clang-format --dry-run --Werror $(C_FILES)

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
