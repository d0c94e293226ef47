/* Runs an execution on its own thread in the server's process: the
 * engine's output callback turns each chunk into a stream event, and the
 * engine's result (or its refusal) becomes the execution's outcome.
 *
 * Cancelling is closing the write end of the execution's cancel pipe: the
 * engine watches the read end as the request's cancel_fd, and a pipe with
 * no writer is readable. */
#include "http/http.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int http_run_prepare(execution *ex)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    ex->cancel_read = fds[0];
    atomic_store(&ex->cancel_fd, fds[1]);
    return 0;
}

/* While it waits for a slow client, output gives up at the execution's
 * deadline or once the execution is cancelled. */
static bool stop_waiting(void *arg)
{
    execution *ex = arg;
    return atomic_load(&ex->cancelled) != CANCEL_NONE || http_now_us() >= ex->deadline_us;
}

/* Streams one chunk to the client. While the client is slow this waits,
 * and so does the program on its own output; once the execution is
 * cancelled the engine is told to stop. */
static int on_output(void *user, rbx_stream stream, const char *data, size_t len)
{
    execution *ex = user;
    size_t frame_len = 0;
    char *frame;
    if (ex->dialect) {
        frame = ex->dialect->output(stream, data, len, &frame_len);
    } else {
        static const char *const types[] = {
            [RBX_STDOUT] = "stdout", [RBX_STDERR] = "stderr", [RBX_DISPLAY] = "display"};
        char *json = rbx_event_to_json(stream, data, len);
        frame = json ? http_stream_frame(ex->format, types[stream], json, &frame_len) : NULL;
        free(json);
    }
    if (frame)
        http_queue_push(&ex->events, frame, frame_len, stop_waiting, ex);
    free(frame);
    return atomic_load(&ex->cancelled) != CANCEL_NONE;
}

void http_run(execution *ex)
{
    rbx_request request = ex->form.request;
    request.cancel_fd = ex->cancel_read;
    rbx_result result;
    rbx_error err = {0};
    bool streaming = ex->format != STREAM_NONE;
    if (rbx_execute(ex->server->engine, &request, streaming ? on_output : NULL, ex, &result,
                    &err) != RBX_OK) {
        http_error_from_engine(&ex->error, &err);
        return;
    }
    http_metrics_execution(ex->server->metrics, result.language ? result.language : "unknown",
                           result.error_type ? result.error_type : "ok", result.duration_ms);
    size_t len;
    if (ex->dialect) /* the stream's last frames, whole */
        ex->result = ex->dialect->end(&result, NULL, &len);
    else
        ex->result = streaming ? rbx_result_event_to_json(&result) : rbx_result_to_json(&result);
    ex->has_result = ex->result != NULL;
    if (!ex->has_result)
        http_error_set(&ex->error, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "out of memory rendering the result");
    rbx_result_free(&result);
}
