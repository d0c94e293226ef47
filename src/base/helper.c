/* Host helper programs (mkfs for session disks, runbox-net for the
 * network): started the one same way, quiet, with only the descriptors
 * they are given; runbox's own found beside it. */
#include "base/fsutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <spawn.h>

int rbx_spawn_helper(const char *path, char *const argv[], char *const envp[], const int *pass,
                     size_t pass_count, pid_t *pid)
{
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    for (size_t i = 0; i < pass_count; i++)
        posix_spawn_file_actions_adddup2(&actions, pass[i], 3 + (int)i);
    int rc = posix_spawn(pid, path, &actions, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}

int rbx_program_beside(const char *name, char *path, size_t size)
{
    ssize_t n = size > 1 ? readlink("/proc/self/exe", path, size - 1) : -1;
    char *slash = n > 0 ? memrchr(path, '/', (size_t)n) : NULL;
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    if (!slash || dir + strlen(name) + 1 > size) {
        if (size)
            path[0] = 0;
        return -1;
    }
    memcpy(slash + 1, name, strlen(name) + 1);
    return 0;
}
