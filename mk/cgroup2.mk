# The cgroup v2 VM: runbox's cgroup v2 code end to end on a pure cgroup v2
# host, whatever this machine's own layout (see tests/cgroup2/run-vm.sh).
# Debian's kernel is downloaded once into CGROUP2_DIR (untracked, kept by
# `make clean`); the guest runs this build from the host's root, read-only.
#
#   make test-cgroup2       the e2e cases whose outcome rests on the cgroup code
#                           (tests/cgroup2/cases.txt; a stage of make test)
#   make test-cgroup2-full  all of e2e in the VM (make test-all)
CGROUP2_DIR ?= build-cgroup2

DEBIAN_PACKAGES += qemu-system-x86 busybox-static cpio

.PHONY: test-cgroup2 test-cgroup2-full

# try-syscall, the e2e suite's syscall probe, and cgroup-selftest are built
# by `build` with runbox.
# The guest's CPUs: two, as cases that ask for two cores need (--cpus 2 is
# refused where the machine has one).
CGROUP2_CPUS ?= 2
test-cgroup2: build
	cmake --build $(BUILD) --target runbox try-syscall cgroup-selftest
	RBX_VM_CPUS=$(CGROUP2_CPUS) RBX_VM_PYTEST="$$(grep -v -e '^#' -e '^$$' tests/cgroup2/cases.txt)" \
	  tests/cgroup2/run-vm.sh $(BUILD) $(CGROUP2_DIR)

test-cgroup2-full: build
	cmake --build $(BUILD) --target runbox try-syscall cgroup-selftest
	tests/cgroup2/run-vm.sh $(BUILD) $(CGROUP2_DIR)
