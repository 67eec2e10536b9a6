# Makefile for pg_cache_ext
#
# Builds, with PGXS:
#   - pg_cache_ext.so, the PostgreSQL module (src/)
#   - the BPF objects (bpf/*.bpf.o) and their libbpf skeletons (bpf/*.skel.h)
#   - pg_cache_ext_loader, the privileged one-shot loader (loader/)
#
# vmlinux.h comes from the build machine's kernel BTF when it has one, else
# from the checked-in fallback bpf/vmlinux-fallback.h.

MODULE_big = pg_cache_ext
OBJS = \
	src/pg_cache_ext.o \
	src/bpf_maps.o \
	src/status.o \
	src/registry.o \
	src/classify.o \
	src/worker.o \
	src/evictor.o \
	src/shared_buffers.o \
	src/wal.o \
	src/file_index.o \
	src/functions.o \
	src/cachestat.o \
	src/aio.o \
	src/sibling.o \
	src/read_ahead.o \
	src/lap_start.o \
	src/scan_commands.o

EXTENSION = pg_cache_ext
DATA = pg_cache_ext--1.0.sql pg_cache_ext--1.1.sql pg_cache_ext--1.0--1.1.sql \
	pg_cache_ext--1.1--1.2.sql
PGFILEDESC = "pg_cache_ext - keep scans from flushing the page cache"

REGRESS = setup status guc functions views upgrade

TAP_TESTS = 1

PG_CPPFLAGS = -I$(srcdir)/bpf
SHLIB_LINK = -lbpf

EXTRA_CLEAN = src/.built-for-pg bpf/*.bpf.o bpf/*.skel.h bpf/vmlinux.h $(LOADER) $(RUNNER) $(TEST_TOOLS) $(FUZZERS)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The PostgreSQL the module's objects (and JIT bitcode) were built against:
# objects of a tree built for another version are built again, not installed into this
# one (the server would refuse to start with an undefined symbol).
PG_BUILD_STAMP = src/.built-for-pg
$(PG_BUILD_STAMP): FORCE
	@v='$(shell $(PG_CONFIG) --version)'; [ "$$(cat $@ 2>/dev/null)" = "$$v" ] || echo "$$v" > $@
$(OBJS) $(OBJS:.o=.bc): $(PG_BUILD_STAMP)
.PHONY: FORCE

# ---------------------------------------------------------------------
# BPF objects and skeletons
# ---------------------------------------------------------------------
CLANG ?= clang
BPFTOOL ?= bpftool
BPF_CFLAGS = -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Wno-unused-function -I$(srcdir)/bpf
BPF_HEADERS = bpf/vmlinux.h bpf/pg_cache_ext.h bpf/maps.bpf.h
BPF_OBJS = bpf/tracker.bpf.o bpf/policy.bpf.o

bpf/vmlinux.h:
	@if [ -r /sys/kernel/btf/vmlinux ]; then \
		echo "generating $@ from /sys/kernel/btf/vmlinux"; \
		$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@; \
	else \
		echo "no /sys/kernel/btf/vmlinux: using bpf/vmlinux-fallback.h"; \
		xz -dc $(srcdir)/bpf/vmlinux-fallback.h.xz > $@; \
	fi

bpf/%.bpf.o: bpf/%.bpf.c $(BPF_HEADERS)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

bpf/%.skel.h: bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# ---------------------------------------------------------------------
# The loader (runs as root) and test tools
# ---------------------------------------------------------------------
# headers of bpf/ that user space shares (the contract, modes, paths, /proc)
SHARED_HEADERS = bpf/pg_cache_ext.h $(wildcard bpf/pce_*.h)
LOADER = loader/pg_cache_ext_loader
LOADER_SRCS = $(wildcard loader/*.c)
LOADER_CFLAGS = -O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation -Ibpf -Iloader
LOADER_LIBS = -lbpf -lelf -lz

# the loader embeds both BPF objects through their skeletons
$(LOADER): $(LOADER_SRCS) $(wildcard loader/*.h) bpf/tracker.skel.h bpf/policy.skel.h $(SHARED_HEADERS) $(BPF_OBJS)
	$(CC) $(LOADER_CFLAGS) -o $@ $(LOADER_SRCS) $(LOADER_LIBS)

# pg_cache_ext_run: runs a command tree (a backup) as a scanner; no privileges
RUNNER = runner/pg_cache_ext_run
$(RUNNER): runner/pg_cache_ext_run.c $(SHARED_HEADERS)
	$(CC) $(LOADER_CFLAGS) -o $@ runner/pg_cache_ext_run.c -lbpf

# the lab's tools (test/lab/run-lab-test.sh builds them on demand too)
TEST_TOOLS = test/check_policy_object test/pce_fill_map test/pce_policy_tool test/pce_mark_self \
	test/pce_fake_io_worker
test/pce_fill_map: test/pce_fill_map.c $(SHARED_HEADERS)
	$(CC) $(LOADER_CFLAGS) -o $@ $< $(LOADER_LIBS)

test/check_policy_object: test/check_policy_object.c
	$(CC) $(LOADER_CFLAGS) -o $@ $< $(LOADER_LIBS)

POLICY_TOOL_SRCS = loader/policy.c loader/pins.c loader/bpffs_mount.c loader/safe_open.c
test/pce_policy_tool: test/pce_policy_tool.c $(POLICY_TOOL_SRCS) loader/policy.h bpf/policy.skel.h bpf/pg_cache_ext.h
	$(CC) $(LOADER_CFLAGS) -o $@ test/pce_policy_tool.c $(POLICY_TOOL_SRCS) $(LOADER_LIBS)
test/pce_mark_self: test/pce_mark_self.c bpf/pg_cache_ext.h
	$(CC) $(LOADER_CFLAGS) -o $@ $< $(LOADER_LIBS)
test/pce_fake_io_worker: test/pce_fake_io_worker.c $(SHARED_HEADERS)
	$(CC) $(LOADER_CFLAGS) -o $@ $< $(LOADER_LIBS)

all: $(BPF_OBJS) $(LOADER) $(RUNNER) $(TEST_TOOLS)

$(OBJS): $(SHARED_HEADERS) src/pg_cache_ext_int.h

install: install-loader
install-loader: $(LOADER) $(RUNNER)
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) $(LOADER) '$(DESTDIR)$(bindir)/pg_cache_ext_loader'
	$(INSTALL_PROGRAM) $(RUNNER) '$(DESTDIR)$(bindir)/pg_cache_ext_run'

uninstall: uninstall-loader
uninstall-loader:
	rm -f '$(DESTDIR)$(bindir)/pg_cache_ext_loader' '$(DESTDIR)$(bindir)/pg_cache_ext_run'

.PHONY: install-loader uninstall-loader

# TAP tests: t/*.pl (with t/PceTest.pm), also any t/*.t
PROVE_TESTS ?=
ifeq ($(strip $(PROVE_TESTS)),)
override PROVE_TESTS = $(sort $(wildcard t/*.pl t/*.t))
endif
PG_PROVE_FLAGS += -I $(srcdir)/t

# the TAP tests alone (installcheck runs pg_regress first and stops on failure)
prove-installcheck:
	$(prove_installcheck)
.PHONY: prove-installcheck

# ---------------------------------------------------------------------
# Fuzzers (libFuzzer, clang): every parser of outside input
# ---------------------------------------------------------------------
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -Iloader -Ibpf
FUZZERS = fuzz/fuzz_scan_commands fuzz/fuzz_loader_options fuzz/fuzz_loader_config

fuzz/fuzz_scan_commands: fuzz/fuzz_scan_commands.c src/scan_commands.c src/scan_commands.h
	$(CLANG) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_scan_commands.c src/scan_commands.c

fuzz/fuzz_loader_options: fuzz/fuzz_loader_options.c loader/options.c loader/options.h $(SHARED_HEADERS)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_loader_options.c loader/options.c

fuzz/fuzz_loader_config: fuzz/fuzz_loader_config.c loader/config.c loader/config.h loader/safe_open.c \
		loader/safe_open.h $(SHARED_HEADERS)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_loader_config.c loader/config.c loader/safe_open.c

fuzzers: $(FUZZERS)
.PHONY: fuzzers
