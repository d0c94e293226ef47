/* How every module reports a failure (rbx_error, filled by rbx_fail), the
 * monotonic clock they time things by, configuration digests, and the crash
 * points tests stop a process at. The bottom of the engine: nothing here
 * knows the engine object. */
#ifndef RBX_BASE_ERROR_H
#define RBX_BASE_ERROR_H

#include "runbox.h"

#include <stdint.h>
#include <stddef.h>

/* error.c: fill err and return its status, so callers can write
 * `return rbx_fail(err, RBX_EINVAL, "...")`. */
rbx_status rbx_fail(rbx_error *err, rbx_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int64_t rbx_now_ms(void); /* monotonic clock */

/* FNV-1a over len bytes, going on from hash (first RBX_DIGEST_START): a
 * digest of configuration, for rbx_engine_fingerprint; not a secret. */
#define RBX_DIGEST_START 14695981039346656037ull
static inline uint64_t rbx_digest_add(uint64_t hash, const void *data, size_t len)
{
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ ((const unsigned char *)data)[i]) * 1099511628211ull;
    return hash;
}
int64_t rbx_now_us(void); /* monotonic clock */

/* Tests only: with RUNBOX_CRASH_AT=name in the environment, the process
 * kills itself (SIGKILL) when it reaches that point, so that a test can
 * check what a crash there leaves behind. */
void rbx_crash_point(const char *name);

#endif
