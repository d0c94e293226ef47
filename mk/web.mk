# The web playground (issue 20): browser tests in headless Chromium from
# Debian, driven by playwright-core (web/'s devDependencies), against a
# real runbox serve per test file.
#
#   make test-web      node --test tests/web/ (screenshots into build/screenshots)
#   make screenshots   the same, keeping the screenshots in docs/screenshots
DEBIAN_PACKAGES += chromium

.PHONY: test-web screenshots

test-web: build
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox node --test tests/web/

screenshots: build
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox RBX_SCREENSHOTS=$(CURDIR)/docs/screenshots node --test tests/web/

test: test-web
