/* runbox serve: the HTTP API over the engine, until SIGTERM or SIGINT. */
#include "http/http.h"
#include "local/local.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Descriptors kept for the engine beside the clients' connections: its
 * sandboxes' pipes, kernels, the storage, logs. */
#define FILES_FOR_ENGINE 1024

/* The signal handler writes here and the main thread waits for it. No
 * thread blocks the signals: a blocked mask would be inherited by every
 * sandboxed program. */
static int shutdown_write_fd = -1;

static void on_signal(int sig)
{
    if (shutdown_write_fd >= 0)
        (void)!write(shutdown_write_fd, "x", 1);
}

static int shutdown_pipe(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    shutdown_write_fd = fds[1];
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return fds[0];
}

/* ADDR:PORT, [IPv6]:PORT or HOST:PORT, resolved to one address. */
static int resolve_listen(const char *option, const char *listen, struct sockaddr_storage *addr,
                          socklen_t *len, char *why, size_t why_size)
{
    const char *colon = strrchr(listen, ':');
    char host[256];
    char *end = NULL;
    /* getaddrinfo() would take port 99999 as 34463: check it here. */
    unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
    if (!colon || colon == listen || !isdigit((unsigned char)colon[1]) || *end || port > 65535 ||
        (size_t)(colon - listen) >= sizeof host) {
        snprintf(why, why_size, "%s needs ADDR:PORT, e.g. 127.0.0.1:8080, not '%.64s'", option,
                 listen);
        return -1;
    }
    bool bracketed = listen[0] == '[' && colon[-1] == ']';
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen) - (bracketed ? 2 : 0),
             listen + (bracketed ? 1 : 0));
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *found;
    int rc = getaddrinfo(host, colon + 1, &hints, &found);
    if (rc != 0) {
        snprintf(why, why_size, "cannot listen on '%.64s': %s", listen, gai_strerror(rc));
        return -1;
    }
    memcpy(addr, found->ai_addr, found->ai_addrlen);
    *len = found->ai_addrlen;
    freeaddrinfo(found);
    return 0;
}

static int open_listener(const struct sockaddr_storage *addr, socklen_t len)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    /* A restart must not wait for the old connections' TIME_WAIT. */
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)addr, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* Each connection is a descriptor: the soft limit on open files (often
 * 1024) is raised as far as --max-connections needs, within the hard
 * limit (which only root could raise; systemd's default is 524288). When
 * the hard limit is too low, the cap is lowered to fit and the log says
 * so. Sandboxed programs get their own limit (spawn.c), not this one. */
static void fit_file_limit(serve_options *o)
{
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) != 0)
        return;
    rlim_t want = (rlim_t)o->max_connections + FILES_FOR_ENGINE;
    if (files.rlim_cur < want) {
        files.rlim_cur = files.rlim_max != RLIM_INFINITY && files.rlim_max < want
                             ? files.rlim_max
                             : want;
        setrlimit(RLIMIT_NOFILE, &files);
        getrlimit(RLIMIT_NOFILE, &files);
    }
    if (files.rlim_cur >= want)
        return;
    rlim_t spare = files.rlim_cur > 2 * FILES_FOR_ENGINE ? FILES_FOR_ENGINE : files.rlim_cur / 2;
    unsigned fits = (unsigned)(files.rlim_cur - spare);
    json_t *line = http_log_event("file_limit");
    json_object_set_new(line, "open_files", json_integer((json_int_t)files.rlim_cur));
    json_object_set_new(line, "max_connections_asked", json_integer(o->max_connections));
    json_object_set_new(line, "max_connections", json_integer(fits));
    json_object_set_new(line, "message",
                        json_string("the open-file limit is too low for --max-connections: "
                                    "raise it (ulimit -n, systemd's LimitNOFILE)"));
    http_log_emit(line);
    o->max_connections = fits;
    if (o->max_per_address > fits)
        o->max_per_address = fits;
}

/* The first log line says where the server listens (the port, too, when
 * it was 0); with E2B's protocol a second one says where that is. */
static void log_listening(const http_server *server, int listen_fd, const char *api)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?", where[NI_MAXHOST + NI_MAXSERV + 4];
    if (getsockname(listen_fd, (struct sockaddr *)&addr, &len) == 0)
        getnameinfo((struct sockaddr *)&addr, len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(where, sizeof where, addr.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
    json_t *line = http_log_event("listening");
    json_object_set_new(line, "listen", json_string(where));
    json_object_set_new(line, "api", json_string(api));
    json_object_set_new(line, "max_running", json_integer(server->options.max_running));
    json_object_set_new(line, "max_queue", json_integer(server->options.max_queue));
    json_object_set_new(line, "token", json_boolean(server->token != NULL));
    json_object_set_new(line, "max_connections", json_integer(server->options.max_connections));
    json_object_set_new(line, "max_connections_per_address",
                        json_integer(server->options.max_per_address));
    json_object_set_new(line, "version", json_string(RBX_VERSION));
    http_log_emit(line);
}

static void unlink_local_socket(rbx_engine *engine)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCAL_SOCKET, rbx_engine_config(engine)->state_dir);
    unlink(path);
}

/* The state directory's local socket, so that the CLI's stateful calls
 * reach this server's kernels; a runbox daemon that serves it already
 * keeps it (its kernels and this server's are apart). */
static local_server *serve_local(rbx_engine *engine)
{
    char why[300];
    int owner = 0;
    int fd = local_listen(rbx_engine_config(engine)->state_dir, &owner, why, sizeof why);
    local_server *local = fd >= 0 ? local_server_start(engine, fd, false) : NULL;
    if (!local) {
        json_t *line = http_log_event("local_socket");
        json_object_set_new(line, "served", json_false());
        json_object_set_new(line, "owner_pid", json_integer(owner));
        json_object_set_new(line, "message", json_string(why));
        http_log_emit(line);
        if (fd >= 0)
            close(fd);
    }
    return local;
}

/* A listening socket, or -1 with errno's message on stderr. */
static int listen_on(const char *listen, const struct sockaddr_storage *addr, socklen_t len)
{
    int fd = open_listener(addr, len);
    if (fd < 0)
        fprintf(stderr, "runbox: cannot listen on %s: %s\n", listen, strerror(errno));
    return fd;
}

/* E2B's contexts and sandboxes, when its protocol is served; false when
 * they cannot be read. */
static bool open_contexts(http_server *server)
{
    if (!server->options.e2b_listen)
        return true;
    char why[600];
    const char *state_dir = rbx_engine_config(server->engine)->state_dir;
    server->contexts = e2b_contexts_open(state_dir, why, sizeof why);
    if (server->contexts)
        server->sandboxes = e2b_sandboxes_open(state_dir, why, sizeof why);
    if (!server->sandboxes)
        fprintf(stderr, "runbox: %s\n", why);
    return server->sandboxes != NULL;
}

static int serve(const cli_globals *globals, http_server *server,
                 const struct sockaddr_storage *addr, socklen_t addr_len,
                 const struct sockaddr_storage *e2b_addr, socklen_t e2b_len)
{
    int listen_fd = listen_on(server->options.listen, addr, addr_len);
    if (listen_fd < 0)
        return EXIT_SYSTEM;
    int e2b_fd = -1;
    if (server->options.e2b_listen &&
        (e2b_fd = listen_on(server->options.e2b_listen, e2b_addr, e2b_len)) < 0) {
        close(listen_fd);
        return EXIT_SYSTEM;
    }
    int rc = 0;
    server->engine = cli_engine(globals, &rc);
    if (!server->engine || !open_contexts(server)) {
        close(listen_fd);
        if (e2b_fd >= 0)
            close(e2b_fd);
        if (server->engine) {
            e2b_contexts_free(server->contexts);
            rbx_engine_free(server->engine);
        }
        return server->engine ? EXIT_SYSTEM : rc;
    }
    /* Before the first request: what a killed predecessor left goes now. */
    rbx_engine_recover(server->engine);
    cli_start_pool(server->engine, "serve");
    local_server *local = serve_local(server->engine);
    int signal_fd = shutdown_pipe();
    if (signal_fd >= 0 && http_server_start(server, listen_fd, e2b_fd) == 0) {
        log_listening(server, listen_fd, "runbox");
        if (e2b_fd >= 0)
            log_listening(server, e2b_fd, "e2b");
        struct pollfd wake = {.fd = signal_fd, .events = POLLIN};
        while (poll(&wake, 1, -1) < 0 && errno == EINTR)
            continue;
        /* The CLI's calls on the local socket stop as HTTP's do: none is
         * taken from now on (a CLI goes to its configuration's daemon, or
         * runs a one-off run itself), and those running have the grace
         * period to finish, alongside HTTP's. */
        int64_t grace_end_ms = (http_now_us() + (int64_t)(server->options.grace_s * 1e6)) / 1000;
        if (local) {
            unlink_local_socket(server->engine);
            local_server_close(local);
        }
        http_server_shutdown(server);
        if (local && !local_server_wait_idle(local, grace_end_ms))
            http_log_emit(http_log_event("local_grace_over_cancelling"));
    } else {
        fprintf(stderr, "runbox: cannot start the HTTP server on %s\n", server->options.listen);
        rc = EXIT_SYSTEM;
        if (local)
            unlink_local_socket(server->engine);
    }
    if (signal_fd >= 0) {
        close(signal_fd);
        close(shutdown_write_fd);
        shutdown_write_fd = -1;
    }
    /* Its name was unlinked above, once only: another server may hold it
     * since. */
    local_server_stop(local);
    e2b_sandboxes_free(server->sandboxes);
    e2b_contexts_free(server->contexts);
    rbx_engine_free(server->engine);
    return rc;
}

int cli_serve(cli_globals *globals, int argc, char **argv)
{
    http_server server = {0};
    int rc = http_options_parse(argc, argv, &server.options, globals);
    if (rc >= 0)
        return rc;
    char why[600];
    struct sockaddr_storage addr, e2b_addr = {0};
    socklen_t addr_len, e2b_len = 0;
    const char *e2b = server.options.e2b_listen;
    if (resolve_listen("--listen", server.options.listen, &addr, &addr_len, why, sizeof why) != 0 ||
        (e2b && resolve_listen("--e2b-listen", e2b, &e2b_addr, &e2b_len, why, sizeof why) != 0) ||
        http_auth_load(&server.options, &server.token, why, sizeof why) != 0)
        return cli_usage_error("serve", "%s", why);
    const char *exposed =
        !http_address_is_loopback((const struct sockaddr *)&addr) ? server.options.listen
        : e2b && !http_address_is_loopback((const struct sockaddr *)&e2b_addr) ? e2b
                                                                               : NULL;
    if (!server.token && exposed)
        return cli_usage_error("serve",
                               "refusing to listen on %s without a token: anyone who can reach "
                               "it could run code on this host (give --token-file FILE or set "
                               "RUNBOX_TOKEN, or listen on 127.0.0.1)",
                               exposed);
    fit_file_limit(&server.options);
    rc = serve(globals, &server, &addr, addr_len, &e2b_addr, e2b_len);
    free(server.token);
    return rc;
}
