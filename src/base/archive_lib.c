/* libarchive, loaded on first use (archive_lib.h): dlopen once, every
 * function looked up at once, so that a missing symbol fails the load and
 * never a call halfway through an archive. */
#include "base/archive_lib.h"
#include "base/error.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

const struct rbx_archive_lib *rbx_ar;

static struct rbx_archive_lib table;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* why the load failed, "" if it did not */

static void load(void)
{
    void *lib = dlopen(RBX_ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(failure, sizeof failure, "%s", dlerror());
        return;
    }
#define RBX_ARCHIVE_LOOKUP(name)                                                                   \
    if (!(table.name = (__typeof__(name) *)dlsym(lib, #name))) {                                   \
        snprintf(failure, sizeof failure, "it has no %s", #name);                                  \
        dlclose(lib);                                                                              \
        return;                                                                                    \
    }
    RBX_ARCHIVE_FUNCTIONS(RBX_ARCHIVE_LOOKUP)
#undef RBX_ARCHIVE_LOOKUP
    rbx_ar = &table; /* kept loaded for the process's life */
}

rbx_status rbx_archive_load(rbx_error *err)
{
    pthread_once(&once, load);
    if (rbx_ar)
        return RBX_OK;
    return rbx_fail(err, RBX_ESYSTEM,
                    "cannot load %s, which runbox uses to read and write archives: %s (install "
                    "the package libarchive13, libarchive13t64 on Debian 13)",
                    RBX_ARCHIVE_SONAME, failure);
}
