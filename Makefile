# goverbs build and test entry points.
#
#   make deps      install the Debian packages the test VM needs (only if missing)
#   make vmexec    build bin/vmexec and its guest init bin/vminit
#   make unit      go vet, a CGO_ENABLED=0 build, and go test ./... on the host
#   make unit-arm64  the fast paths' tests built for arm64, run under qemu-user
#   make vmtest    go test ./... inside the test VM, for each kernel and transport
#   make vmselftest  the harness's own VM tests (byte-exact output, reference tools)
#   make perfcompare  ibperf against perftest side by side in the VM (docs/performance.md)
#   make rsockperf    Go rstream against rdma-core's rstream and kernel TCP in the VM (docs/performance.md)
#   make bench-mlx5-vs-c  the mlx5 data path against rdma-core's libmlx5 (fake kernel, host;
#                         instructions per iteration too where valgrind is installed)
#   make cmrate    rdmacm's connection setup rate against librdmacm's in the VM
#   make fuzz      every go test -fuzz target of the module for FUZZTIME each (at least FUZZMINEXECS runs)
#   make vmrace    the load and integrity tests under -race in the VM, both kernels
#   make soak      the load test for SOAK (default 1h) on 6.12
#   make test      deps + unit + unit-arm64 + fuzz + vmselftest + vmtest + vmrace
#   make demo      ibinfo (if cmd/ibinfo exists) and ibv_devinfo in the VM on 6.12
#
# Knobs: KERNELS, TRANSPORTS, VMTEST_FLAGS (e.g. VMTEST_FLAGS='-run TestX -v'),
# FUZZTIME, FUZZMINEXECS, FUZZPARALLEL, FUZZRUN, FUZZMINIMIZE (see fuzz below),
# PKGS, GOVERBS_VM_CACHE (kernel cache, default ~/.cache/goverbs-vm),
# GOVERBS_VM_VERBOSE=1 (vmexec shows the kernel console and timings).

SHELL       := /bin/bash
GO          ?= go
KERNELS     ?= 6.1 6.12
TRANSPORTS  ?= ioctl write
PKGS        ?= ./...
VMTEST_FLAGS ?=
DEMO_KERNEL ?= 6.12
VMEXEC      := $(CURDIR)/bin/vmexec
# The LD_PRELOAD shim that records rdma-core's commands in the VM, for the
# byte comparison of uverbs' rdmacore_vm_test.go; it needs only libc, so the
# host's gcc builds it at test time.
CAPTURE_SO    := $(CURDIR)/bin/capture.so
CAPTURE_GUEST := /usr/lib/goverbs-capture.so
# cmrate: connection setup on librdmacm, built by the host's gcc and run in
# the VM beside goverbs' own (internal/cminterop's BenchmarkSetup).
CMRATE       := $(CURDIR)/bin/cmrate
CMRATE_GUEST := /usr/local/bin/goverbs-cmrate

# Debian packages: QEMU (qboot comes with qemu-system-data), the guest's
# userland (busybox, rdma-core tools, perftest, iproute2), and the tools the
# harness runs on the host (xz and zstd unpack kernels, cpio checks archives;
# gcc, libibverbs-dev and ibverbs-providers build and run the real libmlx5
# against a fake kernel for provider/mlx5's golden vectors; qemu-user-static
# runs the arm64 build of the fast paths and their assembly; librdmacm-dev
# builds cmrate, librdmacm's side of the connection setup benchmark).
DEB_PACKAGES := qemu-system-x86 qemu-system-data busybox-static ibverbs-utils ibverbs-providers \
	perftest rdmacm-utils iproute2 xz-utils zstd cpio gcc libc6-dev libibverbs-dev librdmacm-dev qemu-user-static
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: all deps vmexec cmrate unit unit-arm64 fuzz perfcompare rsockperf vmrace soak mlx5-hwsuite bench-mlx5 bench-mlx5-vs-c vmtest vmselftest test demo vm-clean mlx5-golden capture transcripts

all: vmexec

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q '^install ok installed$$' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	else \
		echo "deps: all present"; \
	fi

vmexec:
	CGO_ENABLED=0 $(GO) build -o bin/vminit ./internal/testvm/cmd/vminit
	CGO_ENABLED=0 $(GO) build -o bin/vmexec ./internal/testvm/cmd/vmexec

unit:
	$(GO) vet $(PKGS)
	CGO_ENABLED=0 $(GO) build $(PKGS)
	GOVERBS_REQUIRE_LIBMLX5=1 $(GO) test $(PKGS)
	# The mlx5 provider on the software HCA (loopback integrity, posts racing
	# Close) under the race detector.
	$(GO) test -count=1 -race ./provider/mlx5/...

# The arm64 doorbell/BlueFlame assembly and the lock-free rings run under
# qemu-user: the golden, encoder and loopback tests of mlx5 and the rxe
# provider's host tests.
ARM64_MLX5_TESTS := TestGoldenSend|TestGoldenCQE|TestEncode|TestWritePlainIsEncode|TestWriteQuickIsEncode|TestSpinLockExcludes|TestDoorbellOrBlueFlame|TestPostAllocatesNothing|TestLoopbackIntegrity$$|TestLoopbackIntegritySolo|TestSpinLockSolo$$|TestSpinLockBiasRevoked|TestSpinLockBiasSameThread$$
unit-arm64:
	GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64-static -run '$(ARM64_MLX5_TESTS)' ./provider/mlx5/
	GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64-static ./provider/rxe/ ./internal/transport/

$(CAPTURE_SO): uverbs/testdata/capture/capture.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -O2 -Wall -Wextra -Werror -o $@ $<

# capture builds the shim; vmtest adds it to the VM (-add) for
# rdmacore_vm_test.go.
capture: $(CAPTURE_SO)

# transcripts records anew the command streams uverbs' unit tests replay
# (uverbs/testdata/transcripts), on both kernels and both transports.
transcripts: vmexec
	uverbs/testdata/transcripts/record.sh

$(CMRATE): internal/cminterop/testdata/cmrate/cmrate.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $< -lrdmacm -libverbs

# The connection setup rate: goverbs' Dial+Accept against librdmacm (cmrate)
# in one VM boot per kernel (docs/performance.md).
cmrate: vmexec $(CMRATE)
	@for k in $(KERNELS); do \
		echo "=== cmrate kernel=$$k"; \
		GOVERBS_CMRATE=$(CMRATE_GUEST) $(GO) test -count=1 -run '^$$' -bench 'BenchmarkSetup' -benchtime 5x \
			-exec "$(VMEXEC) -kernel $$k -add $(CMRATE):$(CMRATE_GUEST)" ./internal/cminterop/ || exit 1; \
	done

# Every test binary boots its own VM (a few seconds each under TCG). -count=1
# because go test's result cache knows neither the kernel nor the transport.
# A package that fails in a pass runs once more; one that then passes is
# reported FLAKY (internal/testvm/vmtest.sh says why) and listed at the end.
vmtest: vmexec $(CAPTURE_SO) $(CMRATE)
	@failed=""; flaky=$$(mktemp); \
	for k in $(KERNELS); do \
		for tr in $(TRANSPORTS); do \
			echo "=== vmtest kernel=$$k GOVERBS_TRANSPORT=$$tr"; \
			start=$$(date +%s); \
			GO="$(GO)" VMEXEC="$(VMEXEC)" VMEXEC_ADD="-add $(CAPTURE_SO):$(CAPTURE_GUEST) -add $(CMRATE):$(CMRATE_GUEST)" \
				VMTEST_FLAKY=$$flaky GOVERBS_CAPTURE_SHIM=$(CAPTURE_GUEST) GOVERBS_CMRATE=$(CMRATE_GUEST) \
				sh internal/testvm/vmtest.sh $$k $$tr -- $(VMTEST_FLAGS) $(PKGS) \
				|| failed="$$failed $$k/$$tr"; \
			echo "=== vmtest kernel=$$k GOVERBS_TRANSPORT=$$tr: $$(( $$(date +%s) - start ))s"; \
		done; \
	done; \
	if [ -s "$$flaky" ]; then echo "vmtest: packages that failed once and passed when run again:"; cat "$$flaky"; fi; \
	rm -f "$$flaky"; \
	if [ -n "$$failed" ]; then echo "vmtest: FAILED for$$failed"; exit 1; fi; \
	echo "vmtest: all passed"

vmselftest: vmexec
	GOVERBS_VM_SELFTEST=1 GOVERBS_VM_INIT=$(CURDIR)/bin/vminit \
		$(GO) test -count=1 -v -run '^TestVM' ./internal/testvm/

test: deps unit unit-arm64 fuzz vmselftest vmtest vmrace

demo: deps vmexec
	@if ls cmd/ibinfo/*.go >/dev/null 2>&1; then \
		CGO_ENABLED=0 $(GO) build -o bin/ibinfo ./cmd/ibinfo && \
		bin/vmexec -kernel $(DEMO_KERNEL) -add bin/ibinfo:/usr/local/bin/ibinfo -- \
			sh -c 'echo "== ibinfo (goverbs)"; ibinfo; echo "== ibv_devinfo (rdma-core)"; ibv_devinfo'; \
	else \
		echo "demo: no cmd/ibinfo yet; ibv_devinfo only"; \
		bin/vmexec -kernel $(DEMO_KERNEL) -- ibv_devinfo; \
	fi

# Drop the kernel cache (downloaded packages, unpacked kernels, initramfs).
vm-clean:
	rm -rf "$${GOVERBS_VM_CACHE:-$$HOME/.cache/goverbs-vm}"

# Regenerate provider/mlx5's golden vectors from rdma-core's libmlx5 (needs
# the Debian 12 packages above; TestLibmlx5GoldenIsCurrent checks they are
# current on every host test run).
mlx5-golden:
	provider/mlx5/testdata/libmlx5/gen.sh $(CURDIR)/.cache/mlx5-golden
	cp $(CURDIR)/.cache/mlx5-golden/golden.json provider/mlx5/testdata/libmlx5/golden.json

# Many QPs and goroutines sharing QPs and CQs, every payload checksummed,
# under the race detector (bounded: a few seconds of traffic per kernel).
RACE_TESTS := TestLoad|TestRandomIntegrity
# rsocket's tests with a reader and a writer on one connection at once, and
# mappings made and closed against Conn.Close
RSOCKET_RACE_TESTS := TestCopyVM|TestCoalesceVM|TestManyConnsVM|TestDeadlineVM|TestIOMapVM|TestIOMapCloseRaceVM|TestWriteCloseRaceVM|TestCloseWriteExchangeVM
# rdmacm's 200 Dial/Accept pairs at once, with its leak check
RDMACM_RACE_TESTS := TestConcurrentDialVM
vmrace:
	$(MAKE) vmtest TRANSPORTS=ioctl PKGS=./uverbs/ VMTEST_FLAGS='-race -run "$(RACE_TESTS)"'
	$(MAKE) vmtest TRANSPORTS=ioctl PKGS=./rsocket/ VMTEST_FLAGS='-race -run "$(RSOCKET_RACE_TESTS)"'
	$(MAKE) vmtest TRANSPORTS=ioctl PKGS=./rdmacm/ VMTEST_FLAGS='-race -run "$(RDMACM_RACE_TESTS)"'

# The load test for longer: make soak SOAK=8h.
SOAK ?= 1h
soak: vmexec
	GOVERBS_TRANSPORT=ioctl $(GO) test -count=1 -timeout 0 -exec "$(VMEXEC) -kernel 6.12 -timeout 240h" \
		-run TestLoadManyQPs -v ./uverbs/ -soak=$(SOAK)

# The mlx5 hardware suite as a static test binary to copy to a ConnectX host
# (provider/mlx5/HARDWARE.md), and the provider's host benchmarks.
mlx5-hwsuite:
	CGO_ENABLED=0 $(GO) test -c -o bin/mlx5-hwsuite ./provider/mlx5
	CGO_ENABLED=0 $(GO) test -c -o bin/uverbs-hwsuite ./uverbs
bench-mlx5:
	$(GO) test -count=1 -run '^$$' -bench . -benchmem ./provider/mlx5
	$(MAKE) bench-mlx5-vs-c

# The same data-path shapes on rdma-core's libmlx5 (built here with gcc, over
# the golden harness's fake kernel) and on provider/mlx5, alternating, with
# medians and Go/C (docs/performance.md); where valgrind is installed, each
# side's instructions per iteration too (-instructions).
MLX5_BENCH_REPS ?= 7
MLX5_BENCH_INSTRUCTIONS ?= $(if $(shell command -v valgrind),-instructions)
bench-mlx5-vs-c:
	$(GO) run ./internal/mlx5bench -reps $(MLX5_BENCH_REPS) $(MLX5_BENCH_INSTRUCTIONS) -o $(CURDIR)/.cache/mlx5bench.md

# Every fuzz target of the module (found by go test -list, so new ones join
# by themselves), FUZZTIME each; fails on a crash and names the saved input,
# and fails a target that ran fewer than FUZZMINEXECS executions (a target
# too slow to fuzz anything in its time). Each target's line gives its
# executions, their rate, and the new interesting inputs it found:
#   ok     github.com/goverbs/goverbs/internal/abi/cmd/btfextract.FuzzTrim   82.2s  703455 execs (8684/s), 2 new interesting (corpus 34)
# CI keeps 8 s a target (the slowest, FuzzKernelResponses, made 863 in 5 s
# on a 2-core host under a load of 10). Before resolving a parser's issue,
# or after changing one, run the long campaign, minutes a target, one
# worker each on a shared machine:
#   make fuzz FUZZTIME=2m FUZZPARALLEL=1
# FUZZPARALLEL is go test's -parallel, the fuzzing workers (default one per
# CPU); FUZZRUN=Trim limits the run to targets whose name matches a regexp
# (make wants $$ for $: FUZZRUN='^FuzzRun$$').
FUZZTIME     ?= 8s
FUZZMINEXECS ?= 1000
FUZZPARALLEL ?= 0
FUZZRUN      ?=
# The longest minimisation of one input (0: a tenth of FUZZTIME, 1s to 60s),
# so that one large input cannot take a target's whole time.
FUZZMINIMIZE ?= 0
fuzz:
	$(GO) run ./internal/fuzzrun -time $(FUZZTIME) -minexecs $(FUZZMINEXECS) -parallel $(FUZZPARALLEL) \
		-minimizetime $(FUZZMINIMIZE) -run '$(FUZZRUN)'

# ibperf and perftest side by side in the test VM, medians and Go/C ratios
# (docs/performance.md has the method and the last run's table).
PERF_KERNELS ?= 6.1,6.12
PERF_REPS    ?= 7
PERF_SWEEPS  ?= 3
perfcompare: vmexec
	$(GO) run ./internal/perfcompare -kernels $(PERF_KERNELS) -reps $(PERF_REPS) -sweep-reps $(PERF_SWEEPS) -raw docs/perfcompare-raw.json -o $(CURDIR)/.cache/perfcompare.md

# Go rstream (package rsocket) against rdma-core's rstream, kernel TCP beside
# them, one boot per kernel; the tables go into docs/performance.md.
RSOCKPERF_REPS ?= 5
rsockperf: vmexec
	$(GO) run ./internal/rsockperf -kernels $(PERF_KERNELS) -reps $(RSOCKPERF_REPS) -doc $(CURDIR)/docs/performance.md
