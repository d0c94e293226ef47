/* A program's output on its way to the caller (see output.h). */
#include "sandbox/output.h"
#include "base/capture.h"

#include <string.h>

static int emit(rbx_output *output, const char *data, size_t len)
{
    return len ? output->on_output(output->user, output->stream, data, len) : 0;
}

int rbx_output_deliver(rbx_output *output, const char *data, size_t len)
{
    if (output->capture)
        rbx_capture_add(output->capture, data, len);
    if (!output->on_output)
        return 0;
    size_t i = 0;
    if (output->carry_len) {
        /* Complete the character held back from the previous chunk. */
        bool complete = false;
        while (!complete && output->carry_len < sizeof output->carry && i < len) {
            output->carry[output->carry_len++] = data[i++];
            complete =
                rbx_utf8_complete_prefix(output->carry, output->carry_len) == output->carry_len;
        }
        if (!complete && output->carry_len < sizeof output->carry)
            return 0;
        size_t held = output->carry_len;
        output->carry_len = 0;
        if (emit(output, output->carry, held) != 0)
            return -1;
    }
    size_t whole = i + rbx_utf8_complete_prefix(data + i, len - i);
    output->carry_len = len - whole;
    memcpy(output->carry, data + whole, output->carry_len);
    return emit(output, data + i, whole - i);
}

int rbx_output_flush(rbx_output *output)
{
    size_t held = output->carry_len;
    output->carry_len = 0;
    return output->on_output && held ? emit(output, output->carry, held) : 0;
}
