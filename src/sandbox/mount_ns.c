/* Stepping into a mount namespace and back (see mount_ns.h). */
#include "sandbox/mount_ns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

/* A thread may change namespaces only with a file-system context of its
 * own (root, cwd, umask), which every thread of a process shares unless it
 * unshares it: once per thread, and again when a thread it created since
 * shares it (pthread_create copies no context: the new thread shares its
 * creator's, as a stateful call's kernel thread does with the worker that
 * started it). setns says EINVAL then. */
static __thread bool fs_private;

static int join(int ns_fd)
{
    if (setns(ns_fd, CLONE_NEWNS) == 0)
        return 0;
    if (errno != EINVAL || unshare(CLONE_FS) != 0)
        return -1;
    return setns(ns_fd, CLONE_NEWNS);
}

int rbx_mount_ns_enter(int ns_fd, rbx_ns_switch *saved)
{
    saved->active = false;
    if (!fs_private) {
        if (unshare(CLONE_FS) != 0)
            return -1;
        fs_private = true;
    }
    saved->cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    saved->home_ns = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (saved->home_ns < 0 || join(ns_fd) != 0) {
        int error = errno;
        if (saved->cwd >= 0)
            close(saved->cwd);
        if (saved->home_ns >= 0)
            close(saved->home_ns);
        errno = error;
        return -1;
    }
    saved->active = true;
    return 0;
}

void rbx_mount_ns_leave(rbx_ns_switch *saved)
{
    if (!saved->active)
        return;
    int error = errno;
    /* Back where the thread was: its namespace (and so its root), then its
     * working directory, which setns moved to the namespace's root. */
    (void)setns(saved->home_ns, CLONE_NEWNS);
    if (saved->cwd >= 0 && fchdir(saved->cwd) != 0)
        (void)!chdir("/");
    if (saved->cwd >= 0)
        close(saved->cwd);
    close(saved->home_ns);
    saved->active = false;
    errno = error;
}
