/* Nettle's SHA-256 and HMAC-SHA-256, loaded on first use. Only image
 * builds, imports and digests (images/) and checkpoints (kernels/) hash, so runbox does not link libnettle: `runbox
 * --version` and `runbox run` never load it. A caller calls
 * rbx_nettle_load() before its first hash, then calls Nettle through the
 * table, `rbx_nettle->sha256_init(&ctx)`: its members have Nettle's names
 * and types (sha2.h's names are macros for nettle_sha256_*, and so name the
 * members too). */
#ifndef RBX_BASE_NETTLE_LIB_H
#define RBX_BASE_NETTLE_LIB_H

#include "runbox.h"

#include <nettle/hmac.h>
#include <nettle/sha2.h>
#include <nettle/version.h>

#define RBX_NETTLE_FUNCTIONS(X)                                                                    \
    X(nettle_sha256_init)                                                                          \
    X(nettle_sha256_update)                                                                        \
    X(nettle_sha256_digest)                                                                        \
    X(nettle_hmac_sha256_set_key)                                                                  \
    X(nettle_hmac_sha256_update)                                                                   \
    X(nettle_hmac_sha256_digest)

struct rbx_nettle_lib {
#define RBX_NETTLE_MEMBER(name) __typeof__(name) *name;
    RBX_NETTLE_FUNCTIONS(RBX_NETTLE_MEMBER)
#undef RBX_NETTLE_MEMBER
};

/* The shared object loaded: the soname of the Nettle runbox is built
 * against (Nettle 3 is libnettle.so.8). */
#if NETTLE_VERSION_MAJOR == 3
#define RBX_NETTLE_SONAME "libnettle.so.8"
#else
#error "set RBX_NETTLE_SONAME to this Nettle's soname (readelf -d libnettle.so | grep SONAME)"
#endif

/* Loads libnettle once per process (any thread; later calls only look).
 * RBX_OK, or RBX_ESYSTEM with a message naming the library, why it did not
 * load and the package to install. */
rbx_status rbx_nettle_load(rbx_error *err);

/* The table, once rbx_nettle_load has returned RBX_OK; NULL before. */
extern const struct rbx_nettle_lib *rbx_nettle;

#endif
