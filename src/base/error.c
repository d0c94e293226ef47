/* The bottom of the engine: how every module reports a failure, the
 * clock they time things by, and the crash points tests stop them at.
 * Nothing here knows the engine object, so the sandbox's modules and the
 * engine's helpers need nothing above them. */
#include "base/error.h"
#include "runbox.h"

#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rbx_status rbx_fail(rbx_error *err, rbx_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

int64_t rbx_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t rbx_now_ms(void)
{
    return rbx_now_us() / 1000;
}

void rbx_crash_point(const char *name)
{
    const char *at = getenv("RUNBOX_CRASH_AT");
    if (at && !strcmp(at, name))
        raise(SIGKILL);
}
