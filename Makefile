# runbox: convenience targets around CMake. `make deps` needs root (apt-get).
BUILD ?= build
ASAN_BUILD ?= build-asan
PYTEST = /usr/bin/python3 -m pytest

DEBIAN_PACKAGES = build-essential cmake ninja-build pkg-config libjansson-dev libcmocka-dev \
                  libseccomp-dev libmicrohttpd-dev zlib1g-dev python3 python3-pytest python3-numpy \
                  python3-pandas python3-pip python3-venv \
                  python3-matplotlib python3-jsonschema python3-pytest-xdist python3-pytest-rerunfailures \
                  python3-setuptools-whl python3-wheel-whl nodejs bubblewrap libslirp-dev uidmap curl iproute2 procps \
                  e2fsprogs btrfs-progs libnftnl-dev libmnl-dev nftables dnsmasq-base \
                  libarchive-dev nginx-light haproxy nettle-dev mmdebstrap

.PHONY: all build asan deps test test-all clean run bench bench-jupyter mcp-sdk

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
	@# those bring udev, whose rules open /dev/net/tun to every user (runbox
	@# unprivileged runs with loopback only either way: its network needs root).
	@dpkg-query -W -f='$${Status}' chromium 2>/dev/null | grep -q 'ok installed' || { \
	  echo "installing: chromium"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation; }
	npm ci --prefix web --no-audit --no-fund --loglevel=error
	@# CRIU 4 for checkpoints: Debian's package, or on Debian 12 Debian 13's (mk/criu.mk).
	@$(MAKE) --no-print-directory criu
	@# Last: the default runtime image needs the build and mmdebstrap (mk/images.mk).
	@$(MAKE) --no-print-directory default-image

# A build directory is configured and built under its own lock: the test stages run side
# by side and each makes its build first, and two cmake runs in one directory at once
# break it (CI once failed with "ninja: error: failed recompaction" when the default and
# cgroup2 stages regenerated build/ together).
locked_cmake = mkdir -p $(1) && flock $(1)/.make.lock sh -c \
	'cmake -S . -B $(1) -G Ninja $(2) >/dev/null && cmake --build $(1) $(3)'

build:
	$(call locked_cmake,$(BUILD),-DCMAKE_BUILD_TYPE=RelWithDebInfo -DRBX_WERROR=ON)

asan:
	$(call locked_cmake,$(ASAN_BUILD),-DCMAKE_BUILD_TYPE=Debug -DRBX_SANITIZE=ON -DRBX_WERROR=ON)

# `make test` runs the stages of tests/ci/stages.py's plan "ci": the whole suite once in
# the configuration users get (root, the default image, the pool on), and each variant
# (ASan+UBSan, unprivileged, cgroup v2, pooled CLI, host root) with the tests whose code
# path it changes; independent stages side by side. It prints a line per stage at the end
# and stops at the first that fails. `make test-all` runs every suite in every variant, as
# before a change to the sandbox, the pool, the kernels or the storage (README: Tests).
# The stages' targets are in mk/ci.mk.
test:
	/usr/bin/python3 tests/ci/stages.py --plan ci

test-all:
	/usr/bin/python3 tests/ci/stages.py --plan all

# The MCP server is driven by the official TypeScript SDK, from the npm registry.
mcp-sdk: tests/mcp/node_modules/.installed

tests/mcp/node_modules/.installed: tests/mcp/package-lock.json
	cd tests/mcp && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The benchmark: runbox built optimized, against bare interpreters and bubblewrap.
bench: bench-jupyter
	cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DRBX_FRONTENDS=ON >/dev/null
	cmake --build build-bench
	/usr/bin/python3 bench/bench.py --runbox build-bench/runbox --out bench

# A bare Jupyter kernel for the benchmark's comparison with stateful sessions
# (bench/cost.py): ipykernel and jupyter_client from the package index.
bench-jupyter: $(BUILD)/jupyter-venv/.made
$(BUILD)/jupyter-venv/.made:
	/usr/bin/python3 -m venv $(BUILD)/jupyter-venv
	$(BUILD)/jupyter-venv/bin/pip install -q ipykernel jupyter_client
	touch $@

run: build
	$(BUILD)/runbox run python -c "print('Hello, World!')" --json

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-bench

# Further targets, one file per concern (fuzzing, soak, the cgroup v2 VM, the
# stages of make test): each may add to DEBIAN_PACKAGES.
include $(wildcard mk/*.mk)
