/* Which criu runbox uses and whether it works here (criu.h). */
#include "sandbox/criu.h"
#include "sandbox/criu_kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How long criu may take to say its version or to check the host (its
 * check takes about 0.1 s here). */
#define CRIU_ANSWER_MS 5000

static bool executable(const char *path)
{
    return access(path, X_OK) == 0;
}

/* criu on the PATH, then where Debian's package puts it (root's PATH has
 * /usr/sbin, a user's may not). */
static bool search(char *out, size_t size)
{
    const char *path = getenv("PATH");
    char dirs[2048];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        if (!*dir)
            continue;
        snprintf(out, size, "%s/criu", dir);
        if (executable(out))
            return true;
    }
    out[0] = '\0';
    return false;
}

static long elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* Runs criu with one argument, its stdout and stderr into out (what fits;
 * the rest is read and dropped, so criu never blocks on a full pipe).
 * Returns its wait status, or -1 with why set (could not start it, or it
 * did not answer in time: then it is killed). */
static int run(const char *criu, const char *argument, char *out, size_t size, char *why,
               size_t why_size)
{
    out[0] = '\0';
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        snprintf(why, why_size, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
    char *const argv[] = {(char *)"criu", (char *)argument, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, criu, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (rc != 0) {
        close(pipe_fds[0]);
        snprintf(why, why_size, "cannot run %s: %s", criu, strerror(rc));
        return -1;
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    size_t len = 0;
    bool timed_out = false;
    for (;;) {
        long left = CRIU_ANSWER_MS - elapsed_ms(&start);
        struct pollfd ready = {.fd = pipe_fds[0], .events = POLLIN};
        int n = left > 0 ? poll(&ready, 1, (int)left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            timed_out = true;
            break;
        }
        char chunk[4096];
        ssize_t got = read(pipe_fds[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        size_t keep = (size_t)got < size - 1 - len ? (size_t)got : size - 1 - len;
        memcpy(out + len, chunk, keep);
        len += keep;
        out[len] = '\0';
    }
    close(pipe_fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        snprintf(why, why_size, "`%s %s` did not answer within %d s", criu, argument,
                 CRIU_ANSWER_MS / 1000);
        return -1;
    }
    return status;
}

/* Into line: the rest of the line of text that starts with prefix; false
 * when none does. */
static bool line_after(const char *text, const char *prefix, char *line, size_t size)
{
    for (const char *at = text; *at;) {
        size_t n = strcspn(at, "\n");
        if (!strncmp(at, prefix, strlen(prefix)) && n >= strlen(prefix)) {
            snprintf(line, size, "%.*s", (int)(n - strlen(prefix)), at + strlen(prefix));
            return true;
        }
        at += n + (at[n] == '\n');
    }
    return false;
}

/* Into line: the first line of criu's output that reports an error, else
 * its first line that is not empty, else "". */
static void first_error(const char *text, char *line, size_t size)
{
    line[0] = '\0';
    for (const char *at = text; *at;) {
        size_t n = strcspn(at, "\n");
        if (memmem(at, n, "Error", 5)) {
            snprintf(line, size, "%.*s", (int)n, at);
            return;
        }
        if (n && !line[0])
            snprintf(line, size, "%.*s", (int)n, at);
        at += n + (at[n] == '\n');
    }
}

void rbx_criu_probe(const char *named, bool is_root, rbx_criu_support *out)
{
    *out = (rbx_criu_support){0};
    if (named) {
        snprintf(out->path, sizeof out->path, "%s", named);
        if (!executable(named)) {
            snprintf(out->detail, sizeof out->detail,
                     "no criu at %.200s (RUNBOX_CRIU): %s; unset it to use the one `make deps` "
                     "installs",
                     named, strerror(errno));
            return;
        }
    } else if (executable(RBX_CRIU_DEFAULT)) {
        snprintf(out->path, sizeof out->path, "%s", RBX_CRIU_DEFAULT);
    } else if (!search(out->path, sizeof out->path)) {
        snprintf(out->detail, sizeof out->detail,
                 "no criu found (not in %s nor on the PATH): `make deps` installs CRIU 4 "
                 "(Debian's package, or on Debian 12 Debian 13's, see mk/criu.mk)",
                 RBX_CRIU_DEFAULT);
        return;
    }
    char output[8192], why[300], line[300];
    int status = run(out->path, "--version", output, sizeof output, why, sizeof why);
    if (status < 0 || !line_after(output, "Version: ", line, sizeof line)) {
        if (status >= 0)
            first_error(output, line, sizeof line);
        snprintf(out->detail, sizeof out->detail, "%.200s does not say its version: %.150s",
                 out->path, status < 0 ? why : *line ? line : "(it says nothing)");
        return;
    }
    snprintf(out->version, sizeof out->version, "%.*s", (int)strcspn(line, " \t"), line);
    if (atoi(out->version) < RBX_CRIU_MIN_MAJOR) {
        snprintf(out->detail, sizeof out->detail,
                 "criu %s at %.200s is too old: checkpoints need CRIU %d or later (`make deps` "
                 "installs it, see mk/criu.mk)",
                 out->version, out->path, RBX_CRIU_MIN_MAJOR);
        return;
    }
    if (!is_root) {
        snprintf(out->detail, sizeof out->detail,
                 "criu %s at %.200s, but checkpoints need root (criu checkpoints another "
                 "user's namespaces)",
                 out->version, out->path);
        return;
    }
    status = run(out->path, "check", output, sizeof output, why, sizeof why);
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (status >= 0)
            first_error(output, line, sizeof line);
        const char *first = status < 0 ? why : line;
        snprintf(out->detail, sizeof out->detail, "`%.120s check` (criu %s) fails: %.200s",
                 out->path, out->version, *first ? first : "(it says nothing)");
        return;
    }
    char gap[200];
    if (rbx_criu_kernel_gap(gap, sizeof gap)) {
        snprintf(out->detail, sizeof out->detail,
                 "criu %s at %.100s passes `criu check`, but %.200s", out->version, out->path,
                 gap);
        return;
    }
    out->ok = true;
    snprintf(out->detail, sizeof out->detail,
             "criu %s at %.200s passes `criu check`: this host can checkpoint process trees",
             out->version, out->path);
}
