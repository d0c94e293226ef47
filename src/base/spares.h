/* Spares: what a finished execution left that a later one may be given
 * instead of a new one (its cgroup: sandbox/cgroup.c; its scratch space:
 * sessions/scratch_spares.c). A bounded list, the last kept last, with when
 * each was kept, so that the idle ones can be given back. Thread-safe; the
 * items are the caller's to check before putting and to destroy after. */
#ifndef RBX_BASE_SPARES_H
#define RBX_BASE_SPARES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RBX_SPARES_MAX 16

typedef struct rbx_spares {
    pthread_mutex_t lock;
    size_t max, n;
    void *items[RBX_SPARES_MAX];
    int64_t kept_at_ms[RBX_SPARES_MAX];
    uint64_t kept, reused;
} rbx_spares;

#define RBX_SPARES_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

/* Keep at most max (capped at RBX_SPARES_MAX). Those over it are moved into
 * out (RBX_SPARES_MAX entries); returns how many. */
size_t rbx_spares_set_max(rbx_spares *s, size_t max, void **out);
/* Whether one more may be kept now (a caller checks before the work of
 * making an item fit to be kept). */
bool rbx_spares_room(rbx_spares *s);
/* Keeps item; false when there is no room (the caller destroys it). */
bool rbx_spares_put(rbx_spares *s, void *item);
/* The last kept item that fits want, taken out (counted as reused), or
 * NULL. */
void *rbx_spares_take(rbx_spares *s, bool (*fits)(const void *item, const void *want),
                      const void *want);
/* Takes out those kept idle_ms ago or longer (idle_ms < 0: all) into out
 * (RBX_SPARES_MAX entries); returns how many. */
size_t rbx_spares_idle(rbx_spares *s, int64_t idle_ms, void **out);
void rbx_spares_counts(rbx_spares *s, uint64_t *kept, uint64_t *reused);

#endif
