"""pytest plugin for the e2e suite inside the cgroup v2 VM (tests/cgroup2/guest.sh): skips
the cases that cannot pass there for a reason of the VM alone, each with that reason. Any
other failure in the VM is runbox's."""
import os

import pytest

# node id (without parameters: every case of the test) -> why it cannot pass in the VM
NO_REGISTRY = ("needs the npm registry, and the guest has no network device (-nic none, by "
               "design: nothing leaves the VM); installs are covered by the loopback index cases")
VM_ONLY_FAILURES = {
    "tests/e2e/test_deps.py::test_npm_package_is_installed_once_and_imported_with_require_and_import":
        NO_REGISTRY,
    "tests/e2e/test_deps.py::test_unknown_npm_package_is_an_import_error": NO_REGISTRY,
}

# Emulated (TCG, where /dev/kvm cannot boot the guest) the CPU is about ten times slower:
# these cases bound work by wall time with bounds made for real hardware.
EMULATED = "with the CPU emulated (TCG), about ten times slower,"
TCG_ONLY_FAILURES = {
    "tests/e2e/test_core.py::test_infinite_loops_time_out_with_output_kept":
        f"{EMULATED} Python and Node.js do not reliably start within the case's 1 s timeout",
    "tests/e2e/test_sandbox.py::test_10_gib_output_flood_is_drained_with_bounded_memory":
        f"{EMULATED} 10 GiB do not pass through the pipe within the case's 280 s",
    "tests/e2e/test_sandbox.py::test_another_sessions_files_and_the_state_dir_are_unreachable":
        f"{EMULATED} grep -r over the whole root (shared over 9p) takes more than the case's "
        "120 s",
}


# Runtime images: the guest's /var/lib/runbox is a fresh tmpfs, so it has no default image, and
# with no network mmdebstrap cannot build one; what images change is the root, not cgroups.
NO_IMAGE_STORE = ("the guest has no image store and no network to build one with mmdebstrap; "
                  "the host runs these (make test-image)")
VM_ONLY_FAILURES["tests/e2e/test_images.py::test_build_from_a_base_lists_remove"] = NO_IMAGE_STORE


def pytest_collection_modifyitems(config, items):
    skips = dict(VM_ONLY_FAILURES)
    if os.environ.get("RBX_VM_ACCEL") == "tcg":
        skips.update(TCG_ONLY_FAILURES)
    for item in items:
        reason = skips.get(item.nodeid) or skips.get(item.nodeid.split("[")[0])
        if not reason and item.nodeid.startswith("tests/e2e/test_images.py") and \
                "store" in getattr(item, "fixturenames", ()):
            reason = NO_IMAGE_STORE
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"cgroup v2 VM: {reason}"))
