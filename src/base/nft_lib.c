/* libnftnl and libmnl, loaded on first use (nft_lib.h): dlopen once, every
 * function looked up at once. */
#include "base/nft_lib.h"
#include "base/error.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

const struct rbx_nft_lib *rbx_nft;

static struct rbx_nft_lib table;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* why the load failed */

static void load(void)
{
    void *nftnl = dlopen(RBX_NFT_NFTNL, RTLD_NOW | RTLD_LOCAL);
    void *mnl = nftnl ? dlopen(RBX_NFT_MNL, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!mnl) {
        snprintf(failure, sizeof failure, "%s", dlerror());
        if (nftnl)
            dlclose(nftnl);
        return;
    }
#define RBX_NFT_LOOKUP(library, name)                                                              \
    if (!(table.name = (__typeof__(name) *)dlsym(library, #name))) {                               \
        snprintf(failure, sizeof failure, "lib%s has no %s", #library, #name);                     \
        dlclose(mnl);                                                                              \
        dlclose(nftnl);                                                                            \
        return;                                                                                    \
    }
    RBX_NFT_FUNCTIONS(RBX_NFT_LOOKUP)
#undef RBX_NFT_LOOKUP
    rbx_nft = &table; /* kept loaded for the process's life */
}

rbx_status rbx_nft_load(rbx_error *err)
{
    pthread_once(&once, load);
    if (rbx_nft)
        return RBX_OK;
    return rbx_fail(err, RBX_ESYSTEM,
                    "cannot load libnftnl and libmnl, which runbox uses to install a sandbox's "
                    "egress rules: %s (install the packages libnftnl11 and libmnl0, or run with "
                    "--no-network)",
                    failure);
}
