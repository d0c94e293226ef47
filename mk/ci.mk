# The stages of `make test` and `make test-all` (tests/ci/stages.py runs them, side by side
# where they share nothing, and prints what each took). Each stage is a target of its own, so
# that one can be run alone: `make test-asan`, or `tests/ci/stages.py --only asan,pooled`.
#
# The pytest suites run in two passes: every case not marked `serial` with pytest-xdist
# (TEST_JOBS workers: the cases mostly wait on sandboxes, so more workers than cores pay),
# then the `serial` cases alone, which look at the whole host (every runbox cgroup, every
# sandbox process, the host's loop devices) and would see the other workers' sandboxes.
#
# A case that fails is run once more (pytest-rerunfailures) before the stage fails: a few
# cases bound work by wall time, and with the other lane's emulated CPU beside them the
# machine is loaded; a fault of runbox fails twice (the logs say "rerun" for each retry, and -rR names the case).
TEST_JOBS ?= 4
PYTEST_Q = $(PYTEST) -q -p no:cacheprovider --reruns 1 -rR

# $(call two_passes,ENVIRONMENT,PYTEST,FILES): pytest's exit 5 (no case selected: a file
# list with no serial case) is not a failure.
define two_passes
	$(1) $(2) -n $(TEST_JOBS) -m "not serial" $(3)
	$(1) $(2) -m serial $(3) || test $$? -eq 5
endef

ASAN_ENV = ASAN_OPTIONS=$(ASAN_SERVER_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	   RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox
# What users get: the system's image store, whose default image `make deps` built.
# The pytest suites take it from RUNBOX_TEST_ON_IMAGE (tests/e2e/conftest.py), the Node.js
# ones pass RUNBOX_IMAGES to the servers they start.
ON_IMAGE_ENV = RUNBOX_TEST_ON_IMAGE=$(RBX_IMAGES)
NODE_IMAGE_ENV = RUNBOX_IMAGES=$(RBX_IMAGES)

# ASan keeps freed memory in quarantine (256 MB by default) to catch late
# uses; a server streaming tens of MB would hold all of it, and the tests
# that bound the server's memory would measure ASan instead of runbox.
ASAN_SERVER_OPTIONS = detect_leaks=1:abort_on_error=0:quarantine_size_mb=16

.PHONY: layers ci-build test-default test-asan test-unprivileged test-pooled test-host-root \
	test-asan-full test-cgroup2-full image-smoke-all

# The engine's dependencies point down the layers of src/LAYERS, with no circle of files
# and front ends on include/runbox.h alone (tests/ci/layers.py reads the build's objects).
layers: build
	/usr/bin/python3 tests/ci/layers.py --build $(BUILD)

# Everything the stages build, once, before they run side by side; and the layers.
ci-build: build asan fuzz-build mcp-sdk mcp-python-sdk e2b-sdk deploy-venv fuzz-api-venv default-image
	$(MAKE) --no-print-directory layers

# The default configuration, every suite: unit, e2e, http, client, MCP, E2B, the playground.
# The E2B suite runs in one process: E2B's SDK in debug mode reaches its sandbox at the
# fixed port 49999, which two workers cannot both listen on.
test-default: build mcp-sdk mcp-python-sdk e2b-sdk default-image
	cd $(BUILD) && ctest --output-on-failure
	$(PYTEST_Q) tests/ci
	$(call two_passes,$(ON_IMAGE_ENV) RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox,$(PYTEST_Q),\
	  tests/e2e tests/http tests/client)
	cd tests/mcp && $(NODE_IMAGE_ENV) RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox node --test
	$(ON_IMAGE_ENV) RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(MCP_PYTEST) tests/mcp/python
	$(ON_IMAGE_ENV) RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(E2B_PYTEST) tests/e2b
	$(NODE_IMAGE_ENV) RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox node --test tests/web/

# ASan and UBSan: the C that the suites below run, under the sanitizers. The adversarial
# suites (test_sandbox, test_hardening), test_egress and the playground run the same C as
# test_core and the HTTP suite do; test-asan-full runs them too.
ASAN_E2E = tests/e2e/test_core.py tests/e2e/test_storage.py tests/e2e/test_stateful.py \
	   tests/e2e/test_deps.py tests/e2e/test_images.py tests/e2e/test_image_import.py \
	   tests/e2e/test_egress_cli.py tests/e2e/test_one_off_plots.py tests/e2e/test_checkpoints.py \
	   tests/e2e/test_hibernation.py tests/e2e/test_daemon_closing.py
test-asan: asan mcp-sdk mcp-python-sdk e2b-sdk default-image
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure
	$(call two_passes,$(ON_IMAGE_ENV) $(ASAN_ENV),$(PYTEST_Q),$(ASAN_E2E) tests/http tests/client)
	cd tests/mcp && $(NODE_IMAGE_ENV) ASAN_OPTIONS=$(ASAN_SERVER_OPTIONS) \
	  RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox node --test
	$(ON_IMAGE_ENV) $(ASAN_ENV) $(MCP_PYTEST) tests/mcp/python
	$(ON_IMAGE_ENV) $(ASAN_ENV) $(E2B_PYTEST) tests/e2b

test-asan-full: asan mcp-sdk mcp-python-sdk e2b-sdk default-image
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure
	$(call two_passes,$(ON_IMAGE_ENV) $(ASAN_ENV),$(PYTEST_Q),tests/e2e tests/http tests/client)
	cd tests/mcp && $(NODE_IMAGE_ENV) ASAN_OPTIONS=$(ASAN_SERVER_OPTIONS) \
	  RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox node --test
	$(ON_IMAGE_ENV) $(ASAN_ENV) $(MCP_PYTEST) tests/mcp/python
	$(ON_IMAGE_ENV) $(ASAN_ENV) $(E2B_PYTEST) tests/e2b
	$(NODE_IMAGE_ENV) $(ASAN_ENV) node --test tests/web/

# runbox as an ordinary user: user namespaces without root, rlimits instead
# of cgroups. The tests run from a copy the user can read (bench/ too: a
# test checks the benchmark's programs get runbox's environment).
UNPRIVILEGED_USER ?= rbxtest
test-unprivileged: build
	id $(UNPRIVILEGED_USER) >/dev/null 2>&1 || useradd -m -s /bin/bash $(UNPRIVILEGED_USER)
	dir=$$(mktemp -d /tmp/runbox-unprivileged.XXXXXX) && \
	cp -r tests deploy clients bench $(BUILD)/runbox $(BUILD)/runbox-serve $(BUILD)/runbox-net $(BUILD)/runbox-init $(BUILD)/try-syscall $$dir/ && chmod -R a+rX $$dir && \
	su $(UNPRIVILEGED_USER) -s /bin/bash -c "cd $$dir && export RUNBOX_BIN=$$dir/runbox \
	  RUNBOX_TRY_SYSCALL=$$dir/try-syscall && \
	  $(PYTEST_Q) -n $(TEST_JOBS) -m 'not serial' tests/e2e && \
	  { $(PYTEST_Q) -m serial tests/e2e || test \$$? -eq 5; }"; \
	rc=$$?; rm -rf $$dir; exit $$rc

# The adversarial suites again, every `runbox run` served by a prepared
# sandbox of a daemon's pool (tests/e2e/conftest.py: RUNBOX_TEST_POOLED): an
# escape, exhaustion or survivor that only a pooled sandbox allowed fails here.
test-pooled: build default-image
	$(call two_passes,$(ON_IMAGE_ENV) RUNBOX_TEST_POOLED=1 RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox,\
	  $(PYTEST_Q),tests/e2e/test_sandbox.py tests/e2e/test_hardening.py)

# The host's root instead of an image: the sandbox's /usr and /etc, and the interpreters
# environments are built with, come from the host.
test-host-root: build
	$(call two_passes,RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox,$(PYTEST_Q),\
	  tests/e2e/test_sandbox.py tests/e2e/test_hardening.py tests/e2e/test_deps.py \
	  tests/e2e/test_core.py)

# The container image under a real container engine (mk/deploy.mk).
image-smoke-all: image image-smoke
