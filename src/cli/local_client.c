/* The CLI's side of the local sockets (local/local.h): stateful calls and
 * kernel restarts go to the runbox process that holds the kernels: runbox
 * serve when it runs configured as this CLI, else the `runbox daemon` of
 * this CLI's configuration, started when none runs. */
#include "cli/cli.h"
#include "local/local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a daemon that was just started may take to answer. */
#define DAEMON_START_MS 15000

/* Starts `runbox daemon` with every option of this CLI, detached from
 * this process (twice forked, in a session of its own), its errors in
 * <state>/daemon.log. */
static int start_daemon(const cli_globals *globals, const rbx_config *config)
{
    const char *state_dir = config->state_dir;
    json_t *options = cli_daemon_options(globals, config);
    size_t count = json_array_size(options);
    const char **argv = options ? calloc(count + 3, sizeof *argv) : NULL;
    if (!argv) {
        json_decref(options);
        errno = options ? ENOMEM : EILSEQ;
        return -1;
    }
    argv[0] = "runbox";
    argv[1] = "daemon";
    for (size_t i = 0; i < count; i++)
        argv[i + 2] = json_string_value(json_array_get(options, i));
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
    int error = errno;
    free(argv);
    json_decref(options);
    if (first < 0) {
        errno = error;
        return -1;
    }
    while (waitpid(first, NULL, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

int cli_serve_connect(const char *state_dir)
{
    return local_connect(state_dir, LOCAL_SOCKET);
}

int cli_daemon_connect(const cli_globals *globals, const rbx_engine *engine, bool start,
                       char *why, size_t why_size)
{
    const char *state_dir = rbx_engine_config(engine)->state_dir;
    char name[64];
    cli_daemon_socket_name(engine, name, sizeof name);
    int fd = local_connect(state_dir, name);
    if (fd >= 0 || !start) {
        if (fd < 0)
            snprintf(why, why_size, "no runbox daemon of this configuration serves %s",
                     state_dir);
        return fd;
    }
    if (start_daemon(globals, rbx_engine_config(engine)) != 0) {
        snprintf(why, why_size, "cannot start runbox daemon: %s",
                 errno == EILSEQ ? "an option is not UTF-8 text" : strerror(errno));
        return -1;
    }
    for (int waited = 0; waited < DAEMON_START_MS; waited += 10) {
        if ((fd = local_connect(state_dir, name)) >= 0)
            return fd;
        struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    snprintf(why, why_size, "runbox daemon did not start serving %s/%s (see %s/daemon.log)",
             state_dir, name, state_dir);
    return -1;
}

/* Whether name is a daemon's socket: the prefix, 16 hex digits, the suffix. */
static bool daemon_socket_name(const char *name)
{
    size_t prefix = strlen(LOCAL_DAEMON_PREFIX);
    return !strncmp(name, LOCAL_DAEMON_PREFIX, prefix) &&
           strspn(name + prefix, "0123456789abcdef") == 16 &&
           !strcmp(name + prefix + 16, LOCAL_DAEMON_SUFFIX);
}

char **cli_local_sockets(const char *state_dir)
{
    size_t count = 1, cap = 8;
    char **names = calloc(cap + 1, sizeof *names);
    if (!names || !(names[0] = strdup(LOCAL_SOCKET))) {
        free(names);
        return NULL;
    }
    DIR *dir = opendir(state_dir);
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        if (!daemon_socket_name(entry->d_name))
            continue;
        if (count == cap) {
            char **grown = realloc(names, (2 * cap + 1) * sizeof *names);
            if (!grown)
                break;
            names = grown;
            cap *= 2;
        }
        if ((names[count] = strdup(entry->d_name)))
            names[++count] = NULL;
    }
    if (dir)
        closedir(dir);
    return names;
}

void cli_local_sockets_free(char **names)
{
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
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

/* One message (stolen) to the socket name and the first line of its
 * answer, with the pid of the process that answered (0: unknown). */
static json_t *ask_peer(const char *state_dir, const char *name, json_t *message, pid_t *peer)
{
    *peer = 0;
    int fd = local_connect(state_dir, name);
    FILE *in = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!in) {
        json_decref(message);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    *peer = cli_local_peer_pid(fd);
    /* Read even when the peer hung up before the message was sent: a
     * process that is closing answers without reading. */
    errno = 0;
    bool sent = cli_local_send(fd, message) == 0;
    json_t *answer = sent || errno == EPIPE || errno == ECONNRESET ? cli_local_read(in) : NULL;
    fclose(in);
    return answer;
}

json_t *cli_local_ask(const char *state_dir, const char *name, json_t *message)
{
    pid_t ignored;
    return ask_peer(state_dir, name, message, &ignored);
}

pid_t cli_local_ask_stop(const char *state_dir, const char *name)
{
    pid_t pid;
    json_t *answer = ask_peer(state_dir, name, json_pack("{s:s}", "op", "stop"), &pid);
    /* One that was closing already is going all the same: waited for too. */
    const char *type = json_string_value(json_object_get(answer, "type")) ?: "";
    bool stopping = !strcmp(type, "stopping") || !strcmp(type, "closing");
    json_decref(answer);
    return stopping ? pid : 0;
}

bool cli_local_wait_gone(pid_t pid, int timeout_ms)
{
    /* A pidfd where the kernel has them (a reused pid cannot fool it);
     * else the pid polled with signal 0. */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        struct pollfd gone = {.fd = pidfd, .events = POLLIN};
        int n;
        while ((n = poll(&gone, 1, timeout_ms)) < 0 && errno == EINTR)
            ;
        close(pidfd);
        return n > 0;
    }
    if (errno == ESRCH)
        return true;
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        if (kill(pid, 0) != 0 && errno == ESRCH)
            return true;
        struct timespec pause = {.tv_nsec = 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return false;
}

int cli_local_peer_pid(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
}
