# The soak (issue 12): many executions through runbox serve at concurrency 8
# and through runbox mcp, each checked for its own output; then nothing
# lost or mixed, and nothing grown (descriptors, threads, memory, mounts,
# loop devices, cgroups, processes). tests/soak/soak.py says more.
#
#   make soak       10,000 executions through HTTP, 1,000 through MCP
#   make soak-ci    a size that fits CI (run by make test)
SOAK_EXECUTIONS ?= 10000
SOAK_MCP_EXECUTIONS ?= 1000
SOAK_CI_EXECUTIONS ?= 2000
SOAK_CI_MCP_EXECUTIONS ?= 300

.PHONY: soak soak-ci

soak: build
	mkdir -p bench/out
	/usr/bin/python3 tests/soak/soak.py --runbox $(CURDIR)/$(BUILD)/runbox --stateful \
	  --executions $(SOAK_EXECUTIONS) --mcp-executions $(SOAK_MCP_EXECUTIONS) \
	  --out bench/out/soak.json

soak-ci: build
	/usr/bin/python3 tests/soak/soak.py --runbox $(CURDIR)/$(BUILD)/runbox --stateful \
	  --executions $(SOAK_CI_EXECUTIONS) --mcp-executions $(SOAK_CI_MCP_EXECUTIONS)
