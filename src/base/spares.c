/* Spares (spares.h). */
#include "base/spares.h"
#include "base/error.h"

#include <string.h>

/* With the lock held. */
static void remove_at(rbx_spares *s, size_t i)
{
    s->n--;
    memmove(&s->items[i], &s->items[i + 1], (s->n - i) * sizeof *s->items);
    memmove(&s->kept_at_ms[i], &s->kept_at_ms[i + 1], (s->n - i) * sizeof *s->kept_at_ms);
}

size_t rbx_spares_set_max(rbx_spares *s, size_t max, void **out)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    s->max = max < RBX_SPARES_MAX ? max : RBX_SPARES_MAX;
    while (s->n > s->max)
        out[n++] = s->items[--s->n];
    pthread_mutex_unlock(&s->lock);
    return n;
}

bool rbx_spares_room(rbx_spares *s)
{
    pthread_mutex_lock(&s->lock);
    bool room = s->n < s->max;
    pthread_mutex_unlock(&s->lock);
    return room;
}

bool rbx_spares_put(rbx_spares *s, void *item)
{
    pthread_mutex_lock(&s->lock);
    bool kept = s->n < s->max;
    if (kept) {
        s->kept_at_ms[s->n] = rbx_now_ms();
        s->items[s->n++] = item;
        s->kept++;
    }
    pthread_mutex_unlock(&s->lock);
    return kept;
}

void *rbx_spares_take(rbx_spares *s, bool (*fits)(const void *item, const void *want),
                      const void *want)
{
    void *item = NULL;
    pthread_mutex_lock(&s->lock);
    for (size_t i = s->n; i-- > 0;) {
        if (fits(s->items[i], want)) {
            item = s->items[i];
            remove_at(s, i);
            s->reused++;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return item;
}

size_t rbx_spares_idle(rbx_spares *s, int64_t idle_ms, void **out)
{
    size_t n = 0;
    int64_t before = idle_ms < 0 ? INT64_MAX : rbx_now_ms() - idle_ms;
    pthread_mutex_lock(&s->lock);
    for (size_t i = s->n; i-- > 0;) {
        if (s->kept_at_ms[i] <= before) {
            out[n++] = s->items[i];
            remove_at(s, i);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

void rbx_spares_counts(rbx_spares *s, uint64_t *kept, uint64_t *reused)
{
    pthread_mutex_lock(&s->lock);
    *kept = s->kept;
    *reused = s->reused;
    pthread_mutex_unlock(&s->lock);
}
