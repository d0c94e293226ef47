/* Executions running in an engine (execute.c). */
#ifndef RBX_FLOW_RUNNING_H
#define RBX_FLOW_RUNNING_H

#include "runbox.h"

/* So that a session's can be cancelled (rbx_session_cancel). */
typedef struct rbx_running {
    struct rbx_running *next;
    char session_id[RBX_SESSION_ID_MAX + 1];
    int kill_fd; /* an eventfd the execution's poll loop watches */
} rbx_running;

#endif
