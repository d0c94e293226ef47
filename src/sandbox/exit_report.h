/* What a sandbox's init tells runbox when the program ends: written once
 * on the status pipe by init (sandbox/spawn.c) or by the reaper it becomes
 * (sandbox/reaper.c), read by runbox (rbx_sandbox_reap). Plain C: the
 * reaper includes nothing else of runbox. */
#ifndef RBX_EXIT_REPORT_H
#define RBX_EXIT_REPORT_H

#include <sys/resource.h>

typedef struct rbx_exit_report {
    int wait_status;
    struct rusage usage;
} rbx_exit_report;

#endif
