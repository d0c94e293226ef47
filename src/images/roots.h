/* The roots sandboxes run on (roots.c): the host's /usr or an image's tree,
 * with its plan and, as root, its prepared mount namespace. */
#ifndef RBX_IMAGES_ROOTS_H
#define RBX_IMAGES_ROOTS_H

#include "languages/runtime.h"
#include "runbox.h"

#include <pthread.h>
#include <stdbool.h>

/* A root that sandboxes run on: the host's /usr or an image's tree, with
 * its plan (which paths the sandbox shows) and, as root, its prepared
 * mount namespace. Made once per engine and image, kept until the end. */
#define RBX_ROOTS_MAX 16
#define RBX_ROOT_RUNTIMES_MAX 8
typedef struct rbx_root {
    char image[RBX_IMAGE_NAME_MAX];    /* "host" or the image's name */
    char digest[RBX_IMAGE_DIGEST_MAX]; /* "" for host */
    char tree[4096];                   /* the image's tree; "" for host */
    /* Which paths the sandbox shows: built on first use (rbx_root_plan_of),
     * since finding them costs about 150 system calls that a CLI handing its
     * call to a daemon, or listing sessions, has no use for. */
    struct rbx_root_plan *plan;
    bool plan_built;
    pthread_mutex_t plan_lock;
    size_t home_size_mb;
    struct rbx_template *template; /* NULL: none (not root, or turned off) */
    pthread_mutex_t template_lock;
    /* Per language (the runtime table's order), why its interpreter is not
     * in the image: NULL when it is. Found once: an image never changes. */
    const char *runtime_missing[RBX_ROOT_RUNTIMES_MAX];
} rbx_root;

/* roots.c. The root a request runs on: its image (NULL: the default),
 * checked against the operator's allow-list and the store, made on first
 * use. RBX_EINVAL names what may be asked for. */
rbx_status rbx_engine_root(rbx_engine *engine, const char *image, rbx_root **root, rbx_error *err);
/* root's plan, built the first time it is asked for. Never NULL: that the
 * root has a /usr was checked when it was made. */
const struct rbx_root_plan *rbx_root_plan_of(const rbx_root *root);
/* Makes the default root ([0]) when the engine starts. */
rbx_status rbx_roots_init(rbx_engine *engine, rbx_error *err);
void rbx_roots_free(rbx_engine *engine);
/* Unpins the roots' prepared namespaces of this state directory: the next
 * runbox on it builds and pins them again (storage unmount). */
void rbx_roots_unpin(rbx_engine *engine);
/* Whether the runtime's interpreter is in the root (host: always); *why
 * says what is missing. */
bool rbx_root_has_runtime(const rbx_root *root, const rbx_runtime *runtime, char *why,
                          size_t why_size);

/* A descriptor of the root's prepared mount namespace for one sandbox (the
 * caller closes it), or -1 where there is none: the sandbox then builds its
 * root in a copy of the host's namespace. RUNBOX_TEMPLATE=0 turns it off. */
int rbx_root_template_ns(rbx_root *root);
/* Why there is no prepared namespace, or NULL when there is one. */
const char *rbx_root_template_why(rbx_root *root, bool is_root);

#endif
