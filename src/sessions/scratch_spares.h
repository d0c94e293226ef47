/* Spare scratch spaces: a process that runs many executions keeps the
 * scratch spaces (sessions/storage.h) that executions left exactly as they
 * were made, and gives them to later executions instead of making new
 * ones (see scratch_spares.c for what is checked). */
#ifndef RBX_SESSIONS_SCRATCH_SPARES_H
#define RBX_SESSIONS_SCRATCH_SPARES_H

#include "runbox.h"

#include <stdbool.h>
#include <stdint.h>

/* Keep up to max (0: none, and the ones kept are destroyed now). */
void rbx_scratch_keep_spares(rbx_engine *engine, size_t max);
/* Destroys the spares kept more than idle_ms ago (-1: all). */
void rbx_scratch_prune_spares(rbx_engine *engine, int64_t idle_ms);
/* Destroys every spare and frees what keeps them. */
void rbx_scratch_spares_free(rbx_engine *engine);

/* A spare's name, for a scratch space with a home or without; false when
 * none is kept. */
bool rbx_scratch_take_spare(rbx_engine *engine, bool with_home, char name[64]);
/* Keeps the scratch space name (every process that had it gone) when it
 * is as made and there is room; false when it is to be destroyed. */
bool rbx_scratch_keep_spare(rbx_engine *engine, const char *name, bool with_home);

/* How many were kept, and given out again, so far. */
void rbx_scratch_spare_counts(const rbx_engine *engine, uint64_t *kept, uint64_t *reused);

#endif
