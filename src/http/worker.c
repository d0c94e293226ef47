/* The worker process: one execution, then it exits. The server starts it
 * as `runbox [global options] serve --worker plain|stream` with the
 * request's JSON on fd 0, a socket for its messages on fd 1, and on
 * HTTP_WORKER_CANCEL_FD a pipe whose other end the server closes to cancel:
 * that fd is the request's cancel_fd as it is.
 *
 * Why a process of its own: rbx_execute() clones the sandbox's init from
 * the calling process. Cloned from a process with other threads, init holds
 * a copy of every fd the other executions have open (their output pipes,
 * their sessions' locks) until its own program ends, so they cannot finish
 * before it; and glibc's setresuid/setresgid in init wait for a lock that
 * another thread may have held at the time of the clone, forever. A worker
 * has one thread and only its own execution's fds.
 *
 * Messages, one per line: "o" and "e" then a stdout or stderr event
 * (rbx_event_to_json), and last either "r" then the result (the result
 * object, or the result event when streaming) or "x" then
 * {"status": rbx_status, "message": ...} when the engine refused. */
#include "http/http.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUEST_MAX ((size_t)1 << 30)

static int send_all(const char *data, size_t len)
{
    while (len) {
        /* MSG_NOSIGNAL: a server that went away is an error, not SIGPIPE. */
        ssize_t n = send(STDOUT_FILENO, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_message(char kind, const char *json)
{
    size_t len = strlen(json);
    char *line = malloc(len + 2);
    if (!line)
        return -1;
    line[0] = kind;
    memcpy(line + 1, json, len);
    line[len + 1] = '\n';
    int rc = send_all(line, len + 2);
    free(line);
    return rc;
}

static void send_error(rbx_status status, const char *message)
{
    json_t *report = json_pack("{s:i, s:o}", "status", (int)status, "message",
                               http_json_text(message, strlen(message)));
    char *json = json_dumps(report, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(report);
    if (json)
        send_message('x', json);
    free(json);
}

static bool cancelled(void)
{
    struct pollfd cancel = {.fd = HTTP_WORKER_CANCEL_FD, .events = POLLIN};
    return poll(&cancel, 1, 0) > 0;
}

static int on_output(void *user, rbx_stream stream, const char *data, size_t len)
{
    char *json = rbx_event_to_json(stream, data, len);
    int rc = json ? send_message(stream == RBX_STDOUT ? 'o' : 'e', json) : -1;
    free(json);
    /* The client (or the server) is gone: the engine stops the run. */
    return rc != 0 || cancelled();
}

static char *read_request(size_t *len)
{
    size_t cap = 65536;
    char *text = malloc(cap);
    *len = 0;
    while (text) {
        if (*len == cap) {
            char *grown = cap < REQUEST_MAX ? realloc(text, cap * 2) : NULL;
            if (!grown)
                break;
            text = grown;
            cap *= 2;
        }
        ssize_t n = read(STDIN_FILENO, text + *len, cap - *len);
        if (n == 0)
            return text;
        if (n < 0 && errno != EINTR)
            break;
        *len += n > 0 ? (size_t)n : 0;
    }
    free(text);
    return NULL;
}

static void run(rbx_engine *engine, execute_form *form, bool stream)
{
    form->request.cancel_fd = HTTP_WORKER_CANCEL_FD;
    rbx_result result;
    rbx_error err = {0};
    if (rbx_execute(engine, &form->request, stream ? on_output : NULL, NULL, &result, &err) !=
        RBX_OK) {
        send_error(err.status, err.message);
        return;
    }
    char *json = stream ? rbx_result_event_to_json(&result) : rbx_result_to_json(&result);
    if (json)
        send_message('r', json);
    else
        send_error(RBX_ESYSTEM, "out of memory rendering the result");
    free(json);
    rbx_result_free(&result);
}

int http_worker_main(const cli_globals *globals, int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "plain") && strcmp(argv[2], "stream")))
        return cli_usage_error("serve", "--worker is started by runbox serve itself");
    size_t len;
    char *text = read_request(&len);
    http_error why = {.message = "cannot read the request"};
    json_t *body = text ? http_json_parse(text, len, &why) : NULL;
    free(text);
    execute_form form;
    if (!body || !http_form_parse(&form, body, &why)) {
        if (body)
            http_form_free(&form);
        send_error(RBX_EINVAL, why.message);
        return 0;
    }
    int rc;
    rbx_engine *engine = cli_engine(globals, &rc);
    if (engine) {
        run(engine, &form, !strcmp(argv[2], "stream"));
        rbx_engine_free(engine);
    } else {
        send_error(RBX_ESYSTEM, "the engine did not start (its message is in the server's log)");
    }
    http_form_free(&form);
    return 0;
}
