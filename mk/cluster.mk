# Three (then four) runbox serve nodes on loopback addresses behind real nginx
# and HAProxy from Debian, each with the configuration shipped in deploy/.
.PHONY: test-cluster
test-cluster: build
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(PYTEST) -q -p no:cacheprovider tests/cluster
