# MCP over HTTP (issue 33): the official Python SDK (`mcp` from PyPI, unmodified) drives
# runbox serve's /mcp. The SDK goes into a venv of its own that also sees Debian's pytest;
# the stages of make test (mk/ci.mk) run tests/mcp/python with it. The TypeScript SDK and the
# conformance suite are npm packages of tests/mcp (make mcp-sdk).
MCP_PY_SDK_VERSION ?= 2.3.0
MCP_VENV ?= $(BUILD)/mcp-venv
MCP_PYTEST = $(MCP_VENV)/bin/python -m pytest -q -p no:cacheprovider

.PHONY: mcp-python-sdk test-mcp-http

$(MCP_VENV)/.installed:
	rm -rf $(MCP_VENV)
	/usr/bin/python3 -m venv --system-site-packages $(MCP_VENV)
	$(MCP_VENV)/bin/pip install -q mcp==$(MCP_PY_SDK_VERSION)
	touch $@

mcp-python-sdk: $(MCP_VENV)/.installed

# The HTTP transport's suites alone: both SDKs, the raw wire, the conformance suite.
test-mcp-http: build mcp-sdk mcp-python-sdk
	cd tests/mcp && RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox node --test http.test.mjs http-wire.test.mjs conformance.test.mjs
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(MCP_PYTEST) tests/mcp/python
