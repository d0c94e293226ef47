/* Runtime images: read-only root filesystems that sandboxes run on, kept
 * once in the image store (the host's, or --images; engine.c),
 * content-addressed and named.
 *
 *   images/sha256-<hex>/       an image's tree, never changed once there
 *   images/sha256-<hex>.json   how it was made (packages, suite, source)
 *   images/names/<name>        a link to ../sha256-<hex>
 *   images/tmp/                trees being built or unpacked
 *
 * The address is a SHA-256 over the tree walked in name order (each
 * entry's path, type, mode, owner, size and content or link target), so
 * two builds that give the same files share one tree, and a name says
 * which content it meant when it was made. */
#ifndef RBX_IMAGES_H
#define RBX_IMAGES_H

#include "runbox.h"

#include <stdbool.h>
#include <stddef.h>

/* Where an image's tree is, for the sandbox's root plan. */
typedef struct rbx_image_place {
    char name[RBX_IMAGE_NAME_MAX];
    char digest[RBX_IMAGE_DIGEST_MAX];
    char tree[4096];
} rbx_image_place;

/* Whether name may name an image: 1 to 63 of a-z, 0-9, '.', '_', '-',
 * starting with a letter or digit, and not "host" (the host's own /usr). */
bool rbx_image_name_ok(const char *name, char *why, size_t why_size);

/* The named image's tree; RBX_ENOENT when the store has none by that name. */
rbx_status rbx_image_locate(rbx_engine *engine, const char *name, rbx_image_place *place,
                            rbx_error *err);

/* The image operators get when they name none: --image, else "default"
 * when the store has it, else "host" (engine->image_note says why). */
const char *rbx_image_default_name(rbx_engine *engine);

/* Whether the operator lets requests name this image (--allow-images). */
bool rbx_image_allowed(const rbx_engine *engine, const char *name);

/* Why the runtime's interpreter cannot run from the tree open as tree_fd,
 * or NULL when it can (resolved inside the tree, as the sandbox will). */
struct rbx_runtime;
const char *rbx_image_interpreter_missing(int tree_fd, const struct rbx_runtime *runtime);

#endif
