# Runtime images (issue 17). `make deps` builds the default image (Debian 13
# with mmdebstrap: Python 3.13, Node.js 20, the data-science stack) once into
# the system's image store, so that `runbox run` uses it from the start;
# `make test-image` runs the adversarial suites again with every sandbox on
# that image, after the images suite itself.
RBX_IMAGES ?= /var/lib/runbox/images

.PHONY: default-image test-image

default-image: build
	@if $(BUILD)/runbox --images $(RBX_IMAGES) images list --json | grep -q '"name":"default"'; then \
	  echo "the default image is in $(RBX_IMAGES)"; \
	else \
	  echo "building the default image into $(RBX_IMAGES) (mmdebstrap, about a minute)"; \
	  $(BUILD)/runbox --images $(RBX_IMAGES) images build default; \
	fi

test-image: build default-image
	RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox RUNBOX_TEST_IMAGES=$(RBX_IMAGES) $(PYTEST) -q \
	  -p no:cacheprovider tests/e2e/test_images.py
	RUNBOX_TEST_ON_IMAGE=$(RBX_IMAGES) RUNBOX_BIN=$(CURDIR)/$(BUILD)/runbox $(PYTEST) -q \
	  -p no:cacheprovider tests/e2e/test_sandbox.py tests/e2e/test_hardening.py

test: test-image
