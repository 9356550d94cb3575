# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
OUTPUT := .output
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= cc
PYTHON ?= /usr/bin/python3
PREFIX ?= /usr/local

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
VMLINUX := vmlinux/$(ARCH)/vmlinux.h

CFLAGS ?= -g -O2
CFLAGS += -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -MMD -MP
INCLUDES := -I$(OUTPUT) -Ibpf -Iuser
LDLIBS := $(shell pkg-config --libs libbpf 2>/dev/null || echo -lbpf) -lelf -lz -ljson-c -lmicrohttpd

# One object per bpf/*.bpf.c, and pipeprof's, linked from its parts split by concern.
BPF_SRCS := $(wildcard bpf/*.bpf.c)
# state.bpf.o, which defines the shared maps and globals, goes first: the linker of older
# libbpf releases (1.1) leaves maps declared extern before their definition at offset 0.
PIPEPROF_BPF_PARTS := $(OUTPUT)/bpf/pipeprof/state.bpf.o $(filter-out %/state.bpf.o, \
	$(patsubst bpf/pipeprof/%.bpf.c,$(OUTPUT)/bpf/pipeprof/%.bpf.o,$(wildcard bpf/pipeprof/*.bpf.c)))
SKELS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS)) $(OUTPUT)/pipeprof.skel.h

# Pure logic: no BPF, no root; linked into the unit tests too.
PURE_SRCS := user/procmaps.c user/elfsym.c user/classify.c user/report.c user/hist.c \
	user/hist_fmt.c user/gpu_apis.c user/proctree.c user/prom.c user/jsonl.c \
	user/daemon_config.c user/step_baseline.c user/http.c user/waited_on.c user/btf_percpu.c \
	user/target.c user/caps.c user/sanitize.c
PLUMBING_SRCS := $(filter-out $(PURE_SRCS),$(wildcard user/*.c))
PURE_OBJS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(PURE_SRCS))
PLUMBING_OBJS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(PLUMBING_SRCS))

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/tests/%,$(UNIT_SRCS))

FAKECUDA := $(OUTPUT)/fakecuda/libcuda.so.1 $(OUTPUT)/fakecuda/libcudart.so.13

.DELETE_ON_ERROR:
# Skeletons and BPF objects are outputs worth keeping (bpftool inspects them), not intermediates.
.SECONDARY: $(SKELS) $(patsubst %.skel.h,$(OUTPUT)/bpf/%.bpf.o,$(notdir $(SKELS)))
.PHONY: all clean deps test unit-test fixture-test scenario-test fixtures demo install bench bench-daemon bench-compare

all: pipeprof fixtures

pipeprof: $(PURE_OBJS) $(PLUMBING_OBJS)
	$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(OUTPUT) $(OUTPUT)/user $(OUTPUT)/bpf $(OUTPUT)/bpf/pipeprof $(OUTPUT)/tests $(OUTPUT)/fakecuda:
	mkdir -p $@

BPF_CC = $(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(dir $(VMLINUX)) -Ibpf \
	-Wall -Wno-unused-function -MMD -MP -c $< -o $@ && (llvm-strip -g $@ 2>/dev/null || true)

$(OUTPUT)/bpf/%.bpf.o: bpf/%.bpf.c $(VMLINUX) | $(OUTPUT)/bpf
	$(BPF_CC)

$(OUTPUT)/bpf/pipeprof/%.bpf.o: bpf/pipeprof/%.bpf.c $(VMLINUX) | $(OUTPUT)/bpf/pipeprof
	$(BPF_CC)

$(OUTPUT)/bpf/pipeprof.bpf.o: $(PIPEPROF_BPF_PARTS)
	$(BPFTOOL) gen object $@ $^

$(OUTPUT)/%.skel.h: $(OUTPUT)/bpf/%.bpf.o | $(OUTPUT)
	$(BPFTOOL) gen skeleton $< > $@

# Every user object may include a skeleton; generate them first.
$(OUTPUT)/user/%.o: user/%.c $(SKELS) | $(OUTPUT)/user
	$(CC) $(CFLAGS) $(INCLUDES) -c $< -o $@

$(OUTPUT)/tests/%: tests/unit/%.c tests/unit/unit.h $(PURE_OBJS) | $(OUTPUT)/tests
	$(CC) $(CFLAGS) $(INCLUDES) -Itests/unit $< $(PURE_OBJS) $(LDLIBS) -o $@

# GPU fixtures: a fake driver and a runtime named, versioned and exported like CUDA's.
$(OUTPUT)/fakecuda/libcuda.so.1: tools/fakecuda/fakecuda.c tools/fakecuda/fakegpu.h \
		tools/fakecuda/libcuda.map | $(OUTPUT)/fakecuda
	$(CC) -O2 -g -fPIC -shared -Wall -fcf-protection=none -Wl,-soname,libcuda.so.1 \
		-Wl,--version-script=tools/fakecuda/libcuda.map $< -o $@ -lpthread
	ln -sf libcuda.so.1 $(OUTPUT)/fakecuda/libcuda.so

$(OUTPUT)/fakecuda/libcudart.so.13: tools/fakecuda/fakecudart.c tools/fakecuda/fakegpu.h \
		tools/fakecuda/libcudart.map $(OUTPUT)/fakecuda/libcuda.so.1
	$(CC) -O2 -g -fPIC -shared -Wall -fcf-protection=none -Wl,-soname,libcudart.so.13 \
		-Wl,--version-script=tools/fakecuda/libcudart.map -Wl,-rpath,'$$ORIGIN' \
		$< -o $@ -L$(OUTPUT)/fakecuda -lcuda -lpthread
	ln -sf libcudart.so.13 $(OUTPUT)/fakecuda/libcudart.so

fixtures: $(FAKECUDA)

# Installs every build and test dependency from Debian's packages.
deps:
	tools/install-deps.sh

unit-test: $(UNIT_BINS)
	@tools/run-unit-tests.sh $(UNIT_BINS)

fixture-test: fixtures
	$(PYTHON) tools/fakecuda/smoke.py

scenario-test: pipeprof fixtures
	$(PYTHON) -m pytest -v -p no:cacheprovider tests/

test: pipeprof fixtures unit-test fixture-test scenario-test

demo: pipeprof
	tools/demo.sh

bench: pipeprof fixtures
	tools/bench/overhead.py

bench-daemon: pipeprof
	tools/bench/daemon_cost.py

# Side by side: pipeprof -p, hist, daemon, torch.profiler and bpftrace on three loops (~15 min).
bench-compare: pipeprof fixtures
	tools/bench/compare.py

install: pipeprof
	install -D -m 0755 pipeprof $(DESTDIR)$(PREFIX)/sbin/pipeprof
	install -D -m 0644 tools/pipeprof.service $(DESTDIR)/etc/systemd/system/pipeprof.service
	sed -i 's|/usr/local/sbin/pipeprof|$(PREFIX)/sbin/pipeprof|' $(DESTDIR)/etc/systemd/system/pipeprof.service
	test -e $(DESTDIR)/etc/pipeprof/daemon.conf || \
		install -D -m 0644 tools/daemon.conf $(DESTDIR)/etc/pipeprof/daemon.conf

clean:
	rm -rf $(OUTPUT) pipeprof

-include $(wildcard $(OUTPUT)/user/*.d $(OUTPUT)/bpf/*.d $(OUTPUT)/bpf/pipeprof/*.d)
