/* Unpacking an image made elsewhere into a root filesystem tree: a tar of a
 * root filesystem, an OCI image layout (a directory, or a tar of one), or
 * a `docker save` archive. Everything in it is untrusted: runbox runs this
 * as root, so nothing is written through a link, nothing lands outside the
 * tree, and what a sandbox has no use for (devices, set-id programs) is
 * refused before anything of it is written. */
#ifndef RBX_IMAGE_UNPACK_H
#define RBX_IMAGE_UNPACK_H

#include "runbox.h" /* rbx_status, rbx_error */

#include <stdbool.h>
#include <stdint.h>
#include "runbox.h"

typedef struct rbx_unpack_limits {
    uint64_t max_bytes;   /* total of regular files' sizes, every layer counted */
    uint64_t max_entries; /* members, every layer counted */
    bool drop_setid;      /* clear set-uid/set-gid bits instead of refusing them */
} rbx_unpack_limits;

/* Unpacks `source` into root_fd, an empty directory the caller made (and removes on failure).
 * source is one of:
 *  - an OCI image layout directory (has an `oci-layout` file and `index.json`): podman save
 *    --format oci-dir, skopeo copy ... oci:DIR, umoci;
 *  - a tar archive holding such a layout (docker save of Docker 25+, skopeo oci-archive:), or a
 *    docker save archive of older Docker (manifest.json with "Layers");
 *  - otherwise a tar archive of a root filesystem (any compression libarchive reads).
 * For a layout, the manifest is the index's only manifest for linux/amd64 (the architecture runbox
 * was built for), or the only one; its layers are applied in order, gzip/zstd/uncompressed, with
 * OCI whiteouts: `.wh.NAME` removes NAME of the layers below, `.wh..wh..opq` empties its directory
 * of what lower layers put there. Layer digests are checked (sha256 of the blob as stored) before
 * a layer is applied; a docker save archive's layers against its config's diff_ids.
 *
 * The limits are hard: zero allows nothing. A tar holding a layout is unpacked first into a
 * scratch directory under $TMPDIR (default /var/tmp), removed on every way out; its blobs count
 * towards max_bytes and its members towards max_entries too. Refusals are RBX_EINVAL (what is
 * wrong, in which member, and what is accepted), RBX_ENOSPC over a limit, RBX_ENOENT for a
 * missing source, RBX_ESYSTEM when the host fails. */
rbx_status rbx_image_unpack(int root_fd, const char *source, const rbx_unpack_limits *limits,
                            rbx_error *err);

#endif
