/* A running program's output, streamed to a client that asked for progress
 * (_meta.progressToken) as notifications/progress: "progress" is the number
 * of bytes of output so far (it grows with every chunk), "message" the
 * chunk's text. Streaming stops after a budget (the output cap): the result
 * still has the head and the tail, and a model's context is not flooded. */
#include "mcp/mcp.h"

#include <stdio.h>

void mcp_progress_init(mcp_progress *progress, mcp_output *output, mcp_call *call, uint64_t budget)
{
    *progress = (mcp_progress){.output = output, .call = call, .budget = budget};
}

static void notify(mcp_progress *progress, json_t *message)
{
    json_t *params = json_object();
    json_object_set(params, "progressToken", progress->call->progress_token);
    json_object_set_new(params, "progress", json_integer((json_int_t)progress->bytes));
    json_object_set_new(params, "message", message);
    mcp_output_send_progress(progress->output, rpc_notification("notifications/progress", params));
}

int mcp_progress_on_output(void *user, rbx_stream stream, const char *data, size_t len)
{
    mcp_progress *progress = user;
    /* The cancel pipe stops the program too; this stops it between chunks. */
    if (atomic_load(&progress->call->cancelled))
        return 1;
    /* Rich outputs (images as base64) are no progress text: they come with
     * the result, as content blocks. The message is the text as a
     * terminal would show it. */
    if (stream == RBX_DISPLAY)
        return 0;
    progress->bytes += len;
    if (!progress->call->progress_token || !progress->budget)
        return 0;
    if (len <= progress->budget) {
        progress->budget -= len;
        notify(progress, rpc_text(data, len));
        return 0;
    }
    progress->budget = 0;
    char note[160];
    snprintf(note, sizeof note,
             "\n[runbox: live output stops here after %llu bytes; the result keeps the head and "
             "the tail of each stream]\n",
             (unsigned long long)(progress->bytes - len));
    notify(progress, json_string(note));
    return 0;
}
