# runbox: convenience targets around CMake. `make deps` needs root (apt-get).
BUILD ?= build
ASAN_BUILD ?= build-asan
PYTEST = /usr/bin/python3 -m pytest

DEBIAN_PACKAGES = build-essential cmake ninja-build pkg-config libjansson-dev libcmocka-dev \
                  libseccomp-dev libmicrohttpd-dev python3 python3-pytest python3-numpy \
                  python3-pandas python3-pip python3-venv \
                  python3-matplotlib python3-jsonschema nodejs bubblewrap slirp4netns uidmap curl iproute2 procps \
                  e2fsprogs btrfs-progs libnftnl-dev libmnl-dev nftables dnsmasq-base \
                  libarchive-dev nginx-light haproxy nettle-dev mmdebstrap

.PHONY: all build asan deps test test-build test-asan test-unprivileged clean run bench mcp-sdk

all: build

# npm comes with NodeSource's nodejs, which conflicts with Debian's npm
# package: install Debian's only where there is no npm at all. nginx and
# HAProxy are for the cluster tests, which run them themselves: a policy-rc.d
# (unless the host has its own) keeps their packages from starting services.
# Then the playground's editor and bundler (web/, pinned by its lock file),
# and the default runtime image.
deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done; \
	  command -v npm >/dev/null 2>&1 || echo npm); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  policy=; if [ ! -e /usr/sbin/policy-rc.d ]; then policy=/usr/sbin/policy-rc.d; \
	    printf '#!/bin/sh\nexit 101\n' > $$policy && chmod 755 $$policy; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  rc=$$?; [ -z "$$policy" ] || rm -f $$policy; exit $$rc; \
	fi
	@# Chromium for the playground's browser tests, without what it recommends:
	@# those bring udev, whose rules open /dev/net/tun to every user, which
	@# changes what runbox does unprivileged: its network helper then starts, and
	@# fails there today (a gap of the unprivileged mode, not of this suite).
	@dpkg-query -W -f='$${Status}' chromium 2>/dev/null | grep -q 'ok installed' || { \
	  echo "installing: chromium"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation; }
	npm ci --prefix web --no-audit --no-fund --loglevel=error
	@# Last: the default runtime image needs the build and mmdebstrap (mk/images.mk).
	@$(MAKE) --no-print-directory default-image

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRBX_WERROR=ON >/dev/null
	cmake --build $(BUILD)

asan:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRBX_SANITIZE=ON -DRBX_WERROR=ON >/dev/null
	cmake --build $(ASAN_BUILD)

# The whole suite, on the normal build and again under ASan and UBSan, then
# the end-to-end tests again as an unprivileged user.
test: test-build test-asan test-unprivileged

# The MCP server is driven by the official TypeScript SDK, from the npm registry.
mcp-sdk:
	cd tests/mcp && npm ci --no-audit --no-fund --loglevel=error

test-build: build mcp-sdk
	cd $(BUILD) && ctest --output-on-failure
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(PYTEST) -q tests/e2e tests/http tests/client
	cd tests/mcp && RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox node --test

# ASan keeps freed memory in quarantine (256 MB by default) to catch late
# uses; a server streaming tens of MB would hold all of it, and the tests
# that bound the server's memory would measure ASan instead of runbox.
ASAN_SERVER_OPTIONS = detect_leaks=1:abort_on_error=0:quarantine_size_mb=16

test-asan: asan mcp-sdk
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure
	ASAN_OPTIONS=$(ASAN_SERVER_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox $(PYTEST) -q tests/e2e tests/http tests/client
	cd tests/mcp && ASAN_OPTIONS=detect_leaks=1 RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox node --test

# runbox as an ordinary user: user namespaces without root, rlimits instead
# of cgroups. The tests run from a copy the user can read.
UNPRIVILEGED_USER ?= rbxtest
test-unprivileged: build
	id $(UNPRIVILEGED_USER) >/dev/null 2>&1 || useradd -m -s /bin/bash $(UNPRIVILEGED_USER)
	dir=$$(mktemp -d /tmp/runbox-unprivileged.XXXXXX) && \
	cp -r tests deploy clients $(BUILD)/runbox $(BUILD)/try-syscall $$dir/ && chmod -R a+rX $$dir && \
	su $(UNPRIVILEGED_USER) -s /bin/bash -c "cd $$dir && RUNBOX_BIN=$$dir/runbox \
	  RUNBOX_TRY_SYSCALL=$$dir/try-syscall $(PYTEST) -q -p no:cacheprovider tests/e2e"; \
	rc=$$?; rm -rf $$dir; exit $$rc

# The benchmark: runbox built optimized, against bare interpreters and bubblewrap.
bench:
	cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DRBX_FRONTENDS=ON >/dev/null
	cmake --build build-bench
	/usr/bin/python3 bench/bench.py --runbox build-bench/runbox --out bench

run: build
	$(BUILD)/runbox run python -c "print('Hello, World!')" --json

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-bench

# Further targets, one file per concern (fuzzing, soak, the cgroup v2 VM):
# each may add to DEBIAN_PACKAGES and to the targets `test` runs.
include $(wildcard mk/*.mk)
