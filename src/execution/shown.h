/* Rich outputs a program shows (shown.c): a stateful call's display
 * events, a Python one-off's figures. One set of rules for both: what
 * counts as a rich output, and how much of them a result keeps. */
#ifndef RBX_EXECUTION_SHOWN_H
#define RBX_EXECUTION_SHOWN_H

#include "runbox.h"

#include <jansson.h>
#include <stdbool.h>

/* Rich outputs kept per execution; what is past it is counted, not kept. */
#define RBX_RESULTS_CAP ((size_t)8 << 20)

typedef struct rbx_shown {
    json_t *results; /* [{"kind", "data"}], in the order shown */
    size_t bytes;
    uint64_t dropped;  /* bytes of rich outputs (or of lines that were none) left out */
    char *line;        /* a channel's unfinished line (rbx_shown_feed) */
    size_t line_len, line_cap;
    bool skipping;     /* the line is past any that could be kept: dropped to its end */
    rbx_output_fn on_output; /* each kept output, as RBX_DISPLAY, as it comes */
    void *user;
    bool cancelled; /* on_output asked to stop */
} rbx_shown;

void rbx_shown_init(rbx_shown *shown, rbx_output_fn on_output, void *user);
void rbx_shown_free(rbx_shown *shown);
/* The rich output a display event stands for ({"type": "display", "kind":
 * "display_data" or "execute_result", "data": {MIME type: content}}), as
 * {"kind", "data"}; NULL when event is not one. */
json_t *rbx_shown_output(json_t *event);
/* Keeps output (borrowed) when it fits under the cap, else counts it. */
void rbx_shown_add(rbx_shown *shown, json_t *output);
/* Takes bytes of a channel that carries display events one per line:
 * each whole line that is one is kept (rbx_shown_add), any other is
 * counted as left out. */
void rbx_shown_feed(rbx_shown *shown, const char *data, size_t len);
/* The result's results and truncated.results; an unfinished last line is
 * counted as left out. RBX_ESYSTEM when memory ran out. */
rbx_status rbx_shown_finish(rbx_shown *shown, rbx_result *result);

#endif
