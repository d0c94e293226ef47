# The adversarial suites again, every `runbox run` served by a prepared
# sandbox of a daemon's pool (tests/e2e/conftest.py: RUNBOX_TEST_POOLED): an
# escape, exhaustion or survivor that only a pooled sandbox allowed fails here.
.PHONY: test-pooled
test-pooled: build
	RUNBOX_TEST_POOLED=1 RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(PYTEST) -q -p no:cacheprovider \
	  tests/e2e/test_sandbox.py tests/e2e/test_hardening.py

test: test-pooled
