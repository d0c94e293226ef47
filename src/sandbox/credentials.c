/* Credentials in a sandbox's child (see credentials.h). */
#include "sandbox/credentials.h"

#include <sys/syscall.h>
#include <unistd.h>

int rbx_setgroups_none(void)
{
    return (int)syscall(SYS_setgroups, 0, NULL);
}

int rbx_setresgid_uid(unsigned id)
{
    if (syscall(SYS_setresgid, id, id, id) != 0)
        return -1;
    return (int)syscall(SYS_setresuid, id, id, id);
}
