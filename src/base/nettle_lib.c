/* Nettle, loaded on first use (nettle_lib.h): dlopen once, every function
 * looked up at once. */
#include "base/nettle_lib.h"
#include "base/error.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

const struct rbx_nettle_lib *rbx_nettle;

static struct rbx_nettle_lib table;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* why the load failed */

static void load(void)
{
    void *lib = dlopen(RBX_NETTLE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(failure, sizeof failure, "%s", dlerror());
        return;
    }
#define RBX_NETTLE_LOOKUP(name)                                                                    \
    if (!(table.name = (__typeof__(name) *)dlsym(lib, #name))) {                                   \
        snprintf(failure, sizeof failure, "it has no %s", #name);                                  \
        dlclose(lib);                                                                              \
        return;                                                                                    \
    }
    RBX_NETTLE_FUNCTIONS(RBX_NETTLE_LOOKUP)
#undef RBX_NETTLE_LOOKUP
    rbx_nettle = &table; /* kept loaded for the process's life */
}

rbx_status rbx_nettle_load(rbx_error *err)
{
    pthread_once(&once, load);
    if (rbx_nettle)
        return RBX_OK;
    return rbx_fail(err, RBX_ESYSTEM,
                    "cannot load %s, which runbox uses for images' SHA-256 digests: %s (install "
                    "the package libnettle8, libnettle8t64 on Debian 13)",
                    RBX_NETTLE_SONAME, failure);
}

rbx_status rbx_sha256(const void *data, size_t len, unsigned char out[32], rbx_error *err)
{
    rbx_status status = rbx_nettle_load(err);
    if (status != RBX_OK)
        return status;
    struct sha256_ctx ctx;
    rbx_nettle->sha256_init(&ctx);
    rbx_nettle->sha256_update(&ctx, len, data);
#if NETTLE_VERSION_MAJOR >= 4
    rbx_nettle->sha256_digest(&ctx, out);
#else
    rbx_nettle->sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
#endif
    return RBX_OK;
}
