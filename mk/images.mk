# Runtime images (issue 17). `make deps` builds the default image (Debian 13
# with mmdebstrap: Python 3.13, Node.js 20, the data-science stack) once into
# the system's image store, so that `runbox run` uses it from the start; the
# suites of make test run on it (mk/ci.mk: test-default).
RBX_IMAGES ?= /var/lib/runbox/images

.PHONY: default-image

default-image: build
	@if $(BUILD)/runbox --images $(RBX_IMAGES) images list --json | grep -q '"name":"default"'; then \
	  echo "the default image is in $(RBX_IMAGES)"; \
	else \
	  echo "building the default image into $(RBX_IMAGES) (mmdebstrap, about a minute)"; \
	  $(BUILD)/runbox --images $(RBX_IMAGES) images build default; \
	fi
