# Runtime images (issue 17). `make deps` builds the default image (Debian 13
# with mmdebstrap: Python 3.13, the official Node.js 24, the data-science stack) once into
# the system's image store, so that `runbox run` uses it from the start; the
# suites of make test run on it (mk/ci.mk: test-default).
RBX_IMAGES ?= /var/lib/runbox/images
# What the default image records of its Node.js (src/images/node_dist.h).
RBX_NODE_NOTE = $(shell sed -n 's/^\#define RBX_NODE_DIST_NOTE "\(.*\)"$$/\1/p' src/images/node_dist.h)

.PHONY: default-image

# An older default image (Debian's Node.js, before the official one) is built anew.
default-image: build
	@if $(BUILD)/runbox --images $(RBX_IMAGES) images list --json | \
	    grep -q '"name":"default"[^}]*"node":"$(RBX_NODE_NOTE)"'; then \
	  echo "the default image is in $(RBX_IMAGES)"; \
	else \
	  if $(BUILD)/runbox --images $(RBX_IMAGES) images list --json | grep -q '"name":"default"'; then \
	    echo "the default image in $(RBX_IMAGES) is older than this runbox's: building it anew"; \
	    $(BUILD)/runbox --images $(RBX_IMAGES) images rm default; \
	  fi; \
	  echo "building the default image into $(RBX_IMAGES) (mmdebstrap, about a minute)"; \
	  $(BUILD)/runbox --images $(RBX_IMAGES) images build default; \
	fi
