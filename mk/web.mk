# The web playground (issue 20): browser tests in headless Chromium from
# Debian, driven by playwright-core (web/'s devDependencies), against a
# real runbox serve per test file.
#
#   make test-web      node --test tests/web/ (screenshots into build/screenshots)
#   make screenshots   the same, keeping the screenshots in docs/screenshots
# Chromium itself is installed by make deps, without its recommended
# packages (see the Makefile).

.PHONY: test-web test-web-asan screenshots

test-web: build
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox node --test tests/web/

# The same against the ASan and UBSan build: the server must stop clean,
# with no report of either (tests/web/helpers.mjs).
test-web-asan: asan
	ASAN_OPTIONS=$(ASAN_SERVER_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  RUNBOX_BIN=$(CURDIR)/$(ASAN_BUILD)/runbox node --test tests/web/

screenshots: build
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox RBX_SCREENSHOTS=$(CURDIR)/docs/screenshots node --test tests/web/

