/* The few btrfs operations session storage uses: subvolumes (one per
 * session's files, and one per execution's scratch space), quota groups
 * that cap each, and their usage. All are ioctls on directory descriptors,
 * so no btrfs program runs per session. */
#ifndef RBX_BTRFS_H
#define RBX_BTRFS_H

#include <stdbool.h>
#include <stdint.h>

/* Whether fd is on a btrfs filesystem. */
bool rbx_btrfs_is(int fd);
/* Whether dirfd's entry name is the root of a subvolume. */
bool rbx_btrfs_is_subvolume(int dirfd, const char *name);
/* Quota groups: simple quotas where the kernel has them (6.7+: cheap
 * accounting), full qgroups otherwise. Idempotent. Returns 0 or -1/errno. */
int rbx_btrfs_enable_quotas(int fs_fd);
int rbx_btrfs_subvolume_create(int dirfd, const char *name);
/* Deletes a subvolume at once; the kernel frees its space in the background. */
int rbx_btrfs_subvolume_delete(int dirfd, const char *name);
/* Caps the bytes the subvolume that fd is in may refer to (0: no cap). */
int rbx_btrfs_limit(int fd, uint64_t bytes);
/* The bytes the subvolume that fd is in refers to, from its quota group. */
int rbx_btrfs_usage(int fd, uint64_t *bytes);
/* Has what is written under the directory fd compressed with zstd by the
 * filesystem (btrfs's compression property, inherited by new files). */
int rbx_btrfs_compress(int fd);

#endif
