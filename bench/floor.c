/* The namespaces' floor (issue 31): one spawn of a program in fresh
 * namespaces of the kinds a runbox sandbox has (user, PID, mount, IPC,
 * UTS, cgroup and, unless --host-network, network), with the user mapped,
 * and nothing else: no mounts, no cgroup, no seccomp, no helper. What no
 * sandbox that makes fresh namespaces per execution can do below.
 *
 *     floor [--host-network] PROGRAM [ARG...]
 *
 * Built by the benchmark (cc -O2 bench/floor.c); not part of runbox. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

static int write_file(pid_t pid, const char *name, const char *text)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

int main(int argc, char **argv)
{
    int flags = FLAGS | CLONE_NEWNET, first = 1;
    if (argc > 1 && !strcmp(argv[1], "--host-network")) {
        flags &= ~CLONE_NEWNET;
        first = 2;
    }
    if (argc <= first) {
        fprintf(stderr, "usage: floor [--host-network] PROGRAM [ARG...]\n");
        return 2;
    }
    int go[2];
    if (pipe2(go, O_CLOEXEC) != 0)
        return perror("pipe"), 1;
    pid_t pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid < 0)
        return perror("clone"), 1;
    if (pid == 0) {
        char byte;
        close(go[1]);
        if (read(go[0], &byte, 1) != 1)
            _exit(1);
        execv(argv[first], argv + first);
        _exit(127);
    }
    close(go[0]);
    char map[32];
    snprintf(map, sizeof map, "0 %d 1\n", (int)getuid());
    if (write_file(pid, "setgroups", "deny") || write_file(pid, "uid_map", map))
        return perror("uid_map"), 1;
    snprintf(map, sizeof map, "0 %d 1\n", (int)getgid());
    if (write_file(pid, "gid_map", map))
        return perror("gid_map"), 1;
    (void)!write(go[1], "g", 1);
    close(go[1]);
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return perror("waitpid"), 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
