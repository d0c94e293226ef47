/* Credentials in a sandbox's child, as raw system calls: glibc's
 * setresuid() and setgroups() signal every thread the parent had, which a
 * copy of a multi-threaded server does not have, and would wait forever.
 * Used by the child's spawn (spawn.c) and by its root's builder (mount.c). */
#ifndef RBX_SANDBOX_CREDENTIALS_H
#define RBX_SANDBOX_CREDENTIALS_H

int rbx_setgroups_none(void);
int rbx_setresgid_uid(unsigned id); /* setresgid(id x3) then setresuid(id x3) */

#endif
