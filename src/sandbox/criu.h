/* CRIU, the tool that checkpoints and restores a sandbox's process tree
 * (issue 34: hibernation of stateful kernels). Which criu runbox uses and
 * whether it works on this host; docs/hibernation-notes.md has what a
 * checkpoint of a kernel's sandbox needs of it.
 *
 * The criu is the one named (RUNBOX_CRIU), else the one `make deps`
 * extracted from Debian 13 on a Debian 12 host (RBX_CRIU_DEFAULT, see
 * mk/criu.mk), else criu on the PATH or in /usr/sbin (Debian's package). */
#ifndef RBX_SANDBOX_CRIU_H
#define RBX_SANDBOX_CRIU_H

#include <stdbool.h>

#define RBX_CRIU_DEFAULT "/var/lib/runbox/criu/criu"
/* Debian 12's 3.17 cannot read the vDSO of current kernels; 4.x can. */
#define RBX_CRIU_MIN_MAJOR 4

typedef struct rbx_criu_support {
    bool ok;           /* found, recent enough, and `criu check` passes */
    char path[256];    /* the criu found, or "" */
    char version[32];  /* what `criu --version` says, e.g. "4.1.1", or "" */
    char detail[400];  /* in words: what works, or why not */
} rbx_criu_support;

/* Finds criu (named: that one only; NULL: the default places), asks its
 * version and runs `criu check` (as root; each within a few seconds, so a
 * criu that hangs cannot hang the caller), then asks the kernel for what
 * a checkpoint needs that `criu check` does not ask for (criu_kernel.h). */
void rbx_criu_probe(const char *named, bool is_root, rbx_criu_support *out);

#endif
