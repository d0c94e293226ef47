# runbox: convenience targets around CMake. `make deps` needs root (apt-get).
BUILD ?= build
ASAN_BUILD ?= build-asan
PYTEST = /usr/bin/python3 -m pytest

DEBIAN_PACKAGES = build-essential cmake ninja-build pkg-config libjansson-dev libcmocka-dev \
                  libseccomp-dev libmicrohttpd-dev python3 python3-pytest python3-numpy \
                  nodejs bubblewrap slirp4netns uidmap curl iproute2 procps e2fsprogs

.PHONY: all build asan deps test test-build test-asan unit e2e clean run

all: build

deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRBX_WERROR=ON >/dev/null
	cmake --build $(BUILD)

asan:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRBX_SANITIZE=ON -DRBX_WERROR=ON >/dev/null
	cmake --build $(ASAN_BUILD)

# The whole suite, on the normal build and again under ASan and UBSan.
test: test-build test-asan

test-build: build
	cd $(BUILD) && ctest --output-on-failure
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(PYTEST) -q tests/e2e

test-asan: asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox $(PYTEST) -q tests/e2e

run: build
	$(BUILD)/runbox run python -c "print('Hello, World!')" --json

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
