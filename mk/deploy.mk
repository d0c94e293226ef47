# Deployment artifacts (deploy/; deploy/README.md): the systemd unit, the
# container image, the Kubernetes manifests and agent-sandbox template.
#
#   make test-deploy        the manifests validated offline against the Kubernetes
#                           schemas (strict), the ConfigMap in step with
#                           deploy/nginx/runbox.conf, nginx -t, systemd-analyze
#                           (tests/deploy; run by make test)
#   make kubernetes-config  deploy/kubernetes/lb-configmap.yaml again, after a
#                           change to deploy/nginx/runbox.conf or deploy/kubernetes/lb/
#   make image              the container image, an OCI archive in IMAGE_ARCHIVE,
#                           runbox built from this tree on Debian IMAGE_SUITE
#                           (deploy/image/build.sh: root, the Debian archive,
#                           about two minutes; not run by make test)
#   make image-smoke        that image run as a privileged container would be,
#                           and runbox serve checked in it (deploy/image/smoke-test.sh),
#                           then the same checks with the image under podman, as a
#                           node's runtime runs it (deploy/image/podman-smoke-test.sh)
KUBERNETES_VALIDATE_VERSION ?= 1.37.0
# The oldest Kubernetes the manifests are for, and the newest the validator knows.
KUBERNETES_VERSIONS ?= 1.31 1.37
DEPLOY_VENV ?= build-deploy/venv
IMAGE_ARCHIVE ?= build-image/runbox-oci.tar
IMAGE_SUITE ?= trixie

DEBIAN_PACKAGES += mmdebstrap umoci systemd podman runc

.PHONY: test-deploy deploy-venv kubernetes-config image image-smoke

# kubernetes-validate from PyPI beside Debian's pytest and PyYAML.
$(DEPLOY_VENV)/.installed-$(KUBERNETES_VALIDATE_VERSION):
	rm -rf $(DEPLOY_VENV)
	/usr/bin/python3 -m venv --system-site-packages $(DEPLOY_VENV)
	$(DEPLOY_VENV)/bin/pip install -q kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION)
	touch $@

deploy-venv: $(DEPLOY_VENV)/.installed-$(KUBERNETES_VALIDATE_VERSION)

test-deploy: $(DEPLOY_VENV)/.installed-$(KUBERNETES_VALIDATE_VERSION)
	RUNBOX_KUBERNETES_VERSIONS="$(KUBERNETES_VERSIONS)" \
	  $(DEPLOY_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/deploy


kubernetes-config:
	/usr/bin/python3 deploy/kubernetes/render.py

image:
	deploy/image/build.sh -s $(IMAGE_SUITE) -o $(IMAGE_ARCHIVE)

image-smoke:
	deploy/image/smoke-test.sh $(IMAGE_ARCHIVE)
	deploy/image/podman-smoke-test.sh $(IMAGE_ARCHIVE)
