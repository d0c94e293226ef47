/* Memory pressure (issue 34): while the host's available memory is below
 * the operator's floor (--hibernate-below), the kernels' reaper hibernates
 * the least recently used idle kernel, one at a time, before the kernel's
 * own OOM killer has to choose a process for us. */
#ifndef RBX_KERNELS_PRESSURE_H
#define RBX_KERNELS_PRESSURE_H

#include "engine/engine.h"

#include <stdbool.h>
#include <stdint.h>

/* The floor in bytes: the configured one, a tenth of the host's memory by
 * default, or 0 (never). */
uint64_t rbx_memory_floor(const rbx_engine *engine);

/* Whether the host's available memory (MemAvailable) is below floor; false
 * when the floor is 0 or the figure cannot be read. */
bool rbx_memory_short(uint64_t floor);

#endif
