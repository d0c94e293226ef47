# CRIU, for checkpoints of sandboxes (issue 34: hibernation; `runbox check`
# says whether they work here). runbox needs CRIU 4 or later: Debian 12's
# 3.17 cannot read the vDSO of current kernels ("vdso: Unexpected rt vDSO
# area bounds"), Debian 13's 4.1.1 can.
#
# Where the host's own archive has CRIU 4 (Debian 13), this installs Debian's
# package and runbox uses /usr/sbin/criu as it is. On Debian 12 it takes
# Debian 13's package from the same mirror without touching the host's apt
# or dpkg state: mmdebstrap --variant=extract unpacks criu and the libraries
# it depends on (a libc 2.41 among them; no maintainer scripts run) into
# $(RBX_CRIU_DIR)/root, about 26 MB in 10 s, and $(RBX_CRIU_DIR)/criu runs
# that criu with its own loader and library path. Not a chroot: criu must see
# the host's /proc, mounts and cgroups as they are, and runs the host's
# helpers (tar for tmpfs contents, ip and iptables-restore for network
# namespaces). runbox looks for it there before criu on the PATH
# (src/sandbox/criu.c); RUNBOX_CRIU names another. To take a newer Debian 13
# criu (a security update), remove $(RBX_CRIU_DIR) and run `make criu` again.
# criu saves a network namespace's iptables rules with the host's
# iptables-save where the kernel has iptables (Debian's kernels; the
# package does not depend on it).
DEBIAN_PACKAGES += iptables

RBX_CRIU_DIR ?= /var/lib/runbox/criu
RBX_CRIU_SUITE ?= trixie
RBX_CRIU_MIRROR ?= http://deb.debian.org/debian

.PHONY: criu

criu:
	@installed=$$(dpkg-query -W -f='$${Version}' criu 2>/dev/null); \
	candidate=$$(apt-cache policy criu 2>/dev/null | sed -n 's/^ *Candidate: //p'); \
	if [ -n "$$installed" ] && dpkg --compare-versions "$$installed" ge 4; then \
	  echo "criu: Debian's package $$installed is installed"; \
	elif [ -n "$$candidate" ] && [ "$$candidate" != "(none)" ] && \
	     dpkg --compare-versions "$$candidate" ge 4; then \
	  echo "installing: criu $$candidate (Debian's package)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq criu; \
	elif $(RBX_CRIU_DIR)/criu --version 2>/dev/null | grep -q '^Version: [4-9]'; then \
	  echo "criu: $$($(RBX_CRIU_DIR)/criu --version | sed -n 's/^Version: //p') from Debian's $(RBX_CRIU_SUITE) is in $(RBX_CRIU_DIR)"; \
	else \
	  echo "criu: extracting Debian's $(RBX_CRIU_SUITE) criu into $(RBX_CRIU_DIR) (mmdebstrap, about 10 s)"; \
	  rm -rf $(RBX_CRIU_DIR)/root.new $(RBX_CRIU_DIR)/criu.new && mkdir -p $(RBX_CRIU_DIR) && \
	  mmdebstrap --quiet --variant=extract --mode=root --include=criu \
	    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
	    --dpkgopt='path-exclude=/usr/share/locale/*' \
	    $(RBX_CRIU_SUITE) $(RBX_CRIU_DIR)/root.new $(RBX_CRIU_MIRROR) && \
	  loader=$$(ls $(RBX_CRIU_DIR)/root.new/usr/lib/*/ld-linux*.so.* | head -n 1) && \
	  libdir=$$(dirname $$loader | sed 's|$(RBX_CRIU_DIR)/root.new|$(RBX_CRIU_DIR)/root|') && \
	  printf '%s\n' '#!/bin/sh' \
	    '# Debian $(RBX_CRIU_SUITE)'"'"'s criu with its own loader and libraries (made by `make criu`, mk/criu.mk).' \
	    "exec $$libdir/$$(basename $$loader) --library-path $$libdir $(RBX_CRIU_DIR)/root/usr/sbin/criu \"\$$@\"" \
	    > $(RBX_CRIU_DIR)/criu.new && chmod 755 $(RBX_CRIU_DIR)/criu.new && \
	  rm -rf $(RBX_CRIU_DIR)/root && mv $(RBX_CRIU_DIR)/root.new $(RBX_CRIU_DIR)/root && \
	  mv $(RBX_CRIU_DIR)/criu.new $(RBX_CRIU_DIR)/criu && \
	  $(RBX_CRIU_DIR)/criu --version | grep '^Version: [4-9]' && \
	  echo "criu: $(RBX_CRIU_DIR)/criu ($$(du -sh $(RBX_CRIU_DIR)/root | cut -f1)); \`criu check\` says: $$($(RBX_CRIU_DIR)/criu check 2>&1 | head -n 1)"; \
	fi
