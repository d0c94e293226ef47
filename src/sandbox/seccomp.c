/* The system-call filter, installed. The program itself was compiled at
 * build time from the policy in seccomp_policy.c (see there); here it is
 * static data, so installing it takes one prctl and no allocation. */
#include "sandbox/seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "seccomp_program.h"

int rbx_seccomp_available(char *why, size_t why_size)
{
    /* EINVAL: a kernel built without seccomp. */
    if (prctl(PR_GET_SECCOMP, 0UL, 0UL, 0UL, 0UL) >= 0)
        return 0;
    snprintf(why, why_size, "the kernel has no seccomp: %s", strerror(errno));
    return -1;
}

size_t rbx_seccomp_instructions(void)
{
    return sizeof rbx_seccomp_program / sizeof rbx_seccomp_program[0];
}

int rbx_seccomp_install(void)
{
    struct sock_fprog filter = {
        .len = (unsigned short)rbx_seccomp_instructions(),
        /* The kernel copies the program and never writes to it. */
        .filter = (struct sock_filter *)rbx_seccomp_program,
    };
    return prctl(PR_SET_SECCOMP, (unsigned long)SECCOMP_MODE_FILTER, &filter, 0UL, 0UL);
}
