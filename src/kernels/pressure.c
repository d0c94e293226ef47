/* Memory pressure (see pressure.h). */
#include "kernels/pressure.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

uint64_t rbx_memory_floor(const rbx_engine *engine)
{
    int64_t configured = engine->config.hibernate_below_bytes;
    if (configured < 0)
        return 0;
    if (configured > 0)
        return (uint64_t)configured;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 10 : 0;
}

/* MemAvailable, the kernel's estimate of what can be had without
 * swapping (page cache and reclaimable slabs count): MemFree alone would
 * call every host with a warm page cache short of memory. */
static int memory_available(uint64_t *bytes)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return -1;
    char line[128];
    unsigned long long kb;
    int rc = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            *bytes = (uint64_t)kb << 10;
            rc = 0;
            break;
        }
    fclose(f);
    return rc;
}

bool rbx_memory_short(uint64_t floor)
{
    uint64_t available;
    return floor > 0 && memory_available(&available) == 0 && available < floor;
}
