# E2B compatibility (issue 18): E2B's released e2b-code-interpreter SDK, from
# PyPI and unmodified, runs its code on runbox serve --e2b-listen. The SDK
# goes into a venv of its own that also sees Debian's pytest (and pytest-xdist); the
# stages of make test (mk/ci.mk) run it against the normal build and the ASan build.
E2B_SDK_VERSION ?= 2.11.5
# A third-party program built on E2B's SDK, run against runbox unmodified (issue 32):
# Hugging Face's smolagents, whose CodeAgent runs its code in E2B with executor_type="e2b".
SMOLAGENTS_VERSION ?= 1.26.0
E2B_VENV ?= $(BUILD)/e2b-venv
E2B_PYTEST = $(E2B_VENV)/bin/python -m pytest -q -p no:cacheprovider --reruns 1 -rR

.PHONY: e2b-sdk e2b-js-sdk test-e2b test-e2b-asan

$(E2B_VENV)/.installed:
	rm -rf $(E2B_VENV)
	/usr/bin/python3 -m venv --system-site-packages $(E2B_VENV)
	$(E2B_VENV)/bin/pip install -q e2b-code-interpreter==$(E2B_SDK_VERSION)
	touch $@

$(E2B_VENV)/.installed-smolagents-$(SMOLAGENTS_VERSION): $(E2B_VENV)/.installed
	$(E2B_VENV)/bin/pip install -q smolagents==$(SMOLAGENTS_VERSION)
	touch $@

e2b-sdk: $(E2B_VENV)/.installed $(E2B_VENV)/.installed-smolagents-$(SMOLAGENTS_VERSION) e2b-js-sdk

# E2B's JavaScript SDKs (e2b, @e2b/code-interpreter), from the npm registry at the
# versions tests/e2b/js/package-lock.json pins; tests/e2b runs its scripts with node.
e2b-js-sdk: tests/e2b/js/node_modules/.installed

tests/e2b/js/node_modules/.installed: tests/e2b/js/package-lock.json
	cd tests/e2b/js && npm ci --no-audit --no-fund --loglevel=error
	touch $@

test-e2b: build e2b-sdk
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(E2B_PYTEST) tests/e2b

test-e2b-asan: asan e2b-sdk
	ASAN_OPTIONS=$(ASAN_SERVER_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox $(E2B_PYTEST) tests/e2b

bench: e2b-sdk
