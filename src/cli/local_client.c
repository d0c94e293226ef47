/* The CLI's side of the local socket (local/local.h): stateful calls and
 * kernel restarts go to the runbox process that holds the kernels, which
 * is started as `runbox daemon` when nobody serves the state directory. */
#include "cli/cli.h"
#include "local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a daemon that was just started may take to answer. */
#define DAEMON_START_MS 15000
/* "runbox daemon --state-dir DIR", seven options with their values, the
 * egress policy's five, and the NULL. */
#define DAEMON_ARGV_MAX (4 + 2 * 10 + 2 * 5 + 1)

static int try_connect(const char *state_dir)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/" LOCAL_SOCKET, state_dir) >=
        sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0)
        return fd;
    int error = errno;
    if (fd >= 0)
        close(fd);
    errno = error;
    return -1;
}

/* The egress policy, given whole: the daemon's own environment (or a
 * RUNBOX_EGRESS_DEFAULT it would refuse) must not change what it applies. */
static size_t egress_argv(const cli_globals *g, const char **argv, size_t n)
{
    argv[n++] = "--egress-default";
    argv[n++] = g->egress_open ? "open" : g->egress_allowlist_only ? "none" : "public";
    const struct {
        const char *option, *value;
    } given[] = {{"--egress-allow", g->egress_allow},
                 {"--egress-deny", g->egress_deny},
                 {"--egress-resolver", g->egress_resolver},
                 {"--egress-file", g->egress_file}};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        if (given[i].value) {
            argv[n++] = given[i].option;
            argv[n++] = given[i].value;
        }
    }
    return n;
}

/* The options a daemon needs to serve as this CLI would (its engine's);
 * at most DAEMON_ARGV_MAX entries with the NULL. */
static void daemon_argv(const cli_globals *g, const char *state_dir, char *numbers[7],
                        const char **argv)
{
    size_t n = 0;
    argv[n++] = "runbox";
    argv[n++] = "daemon";
    argv[n++] = "--state-dir";
    argv[n++] = state_dir;
    if (g->policy_file) {
        argv[n++] = "--policy";
        argv[n++] = g->policy_file;
    }
    if (g->install_network_host) {
        argv[n++] = "--install-network";
        argv[n++] = "host";
    }
    static const char *const storage[] = {"auto", "btrfs", "plain"};
    argv[n++] = "--storage";
    argv[n++] = storage[g->storage];
    if (g->max_cpus > 0 && asprintf(&numbers[0], "%g", g->max_cpus) > 0) {
        argv[n++] = "--max-cpus";
        argv[n++] = numbers[0];
    }
    if (g->storage_bytes &&
        asprintf(&numbers[1], "%llu", (unsigned long long)g->storage_bytes) > 0) {
        argv[n++] = "--storage-size";
        argv[n++] = numbers[1];
    }
    if (g->kernel_idle_s > 0 && asprintf(&numbers[2], "%g", g->kernel_idle_s) > 0) {
        argv[n++] = "--kernel-idle";
        argv[n++] = numbers[2];
    }
    if (g->max_kernels && asprintf(&numbers[3], "%u", g->max_kernels) > 0) {
        argv[n++] = "--max-kernels";
        argv[n++] = numbers[3];
    }
    if (g->pool >= 0 && asprintf(&numbers[4], "%d", (int)g->pool) > 0) {
        argv[n++] = "--pool";
        argv[n++] = numbers[4];
    }
    if (g->pool_memory_bytes &&
        asprintf(&numbers[5], "%llu", (unsigned long long)g->pool_memory_bytes) > 0) {
        argv[n++] = "--pool-memory";
        argv[n++] = numbers[5];
    }
    if (g->pool_idle_s > 0 && asprintf(&numbers[6], "%g", g->pool_idle_s) > 0) {
        argv[n++] = "--pool-idle";
        argv[n++] = numbers[6];
    }
    n = egress_argv(g, argv, n);
    argv[n] = NULL;
}

/* Starts `runbox daemon` detached from this process (twice forked, in a
 * session of its own), its errors in <state>/daemon.log. */
static int start_daemon(const cli_globals *globals, const char *state_dir)
{
    char *numbers[7] = {NULL};
    const char *argv[DAEMON_ARGV_MAX];
    daemon_argv(globals, state_dir, numbers, argv);
    char log[4200];
    snprintf(log, sizeof log, "%s/daemon.log", state_dir);
    pid_t first = fork();
    if (first == 0) {
        setsid();
        if (fork() != 0)
            _exit(0);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int err = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        dup2(err >= 0 ? err : null, 2);
        execv("/proc/self/exe", (char *const *)argv);
        _exit(127);
    }
    for (size_t i = 0; i < 7; i++)
        free(numbers[i]);
    if (first < 0)
        return -1;
    while (waitpid(first, NULL, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

int cli_local_connect(const cli_globals *globals, const char *state_dir, bool start, char *why,
                      size_t why_size)
{
    int fd = try_connect(state_dir);
    if (fd >= 0 || !start) {
        if (fd < 0)
            snprintf(why, why_size, "no runbox process serves %s/" LOCAL_SOCKET, state_dir);
        return fd;
    }
    if (start_daemon(globals, state_dir) != 0) {
        snprintf(why, why_size, "cannot start runbox daemon: %s", strerror(errno));
        return -1;
    }
    for (int waited = 0; waited < DAEMON_START_MS; waited += 10) {
        if ((fd = try_connect(state_dir)) >= 0)
            return fd;
        struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    snprintf(why, why_size,
             "runbox daemon did not start serving %s/" LOCAL_SOCKET " (see %s/daemon.log)",
             state_dir, state_dir);
    return -1;
}

int cli_local_send(int fd, json_t *message)
{
    char *text = json_dumps(message, JSON_COMPACT);
    json_decref(message);
    if (!text)
        return -1;
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps leaves room for its NUL: the line ends here instead */
    const char *p = text;
    size_t left = len + 1;
    while (left) {
        ssize_t n = send(fd, p, left, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(text);
            return -1;
        }
        p += n;
        left -= (size_t)n;
    }
    free(text);
    return 0;
}

json_t *cli_local_read(FILE *in)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, in);
    json_t *value = n > 0 ? json_loadb(line, (size_t)n, 0, NULL) : NULL;
    free(line);
    return value;
}

int cli_local_error(json_t *event)
{
    const char *message = json_string_value(json_object_get(event, "message"));
    rbx_error err = {
        .status = local_status_from_name(json_string_value(json_object_get(event, "status")))};
    snprintf(err.message, sizeof err.message, "%s", message ? message : "unknown error");
    return cli_engine_error(&err);
}
