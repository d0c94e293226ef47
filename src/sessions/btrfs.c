/* btrfs ioctls for session storage (see btrfs.h). */
#include "sessions/btrfs.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

/* BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA: Linux 6.7's uapi, absent from older headers. */
#define QUOTA_CTL_ENABLE_SIMPLE 4

bool rbx_btrfs_is(int fd)
{
    struct statfs st;
    return fstatfs(fd, &st) == 0 && st.f_type == BTRFS_SUPER_MAGIC;
}

bool rbx_btrfs_is_subvolume(int dirfd, const char *name)
{
    /* A subvolume's root directory is inode 256 in a tree of its own. */
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
           st.st_ino == BTRFS_FIRST_FREE_OBJECTID;
}

int rbx_btrfs_enable_quotas(int fs_fd)
{
    struct btrfs_ioctl_quota_ctl_args args = {.cmd = QUOTA_CTL_ENABLE_SIMPLE};
    if (ioctl(fs_fd, BTRFS_IOC_QUOTA_CTL, &args) == 0)
        return 0;
    args = (struct btrfs_ioctl_quota_ctl_args){.cmd = BTRFS_QUOTA_CTL_ENABLE};
    return ioctl(fs_fd, BTRFS_IOC_QUOTA_CTL, &args);
}

static int copy_name(char *out, size_t size, const char *name)
{
    if (strlen(name) >= size || strchr(name, '/')) {
        errno = EINVAL;
        return -1;
    }
    snprintf(out, size, "%s", name);
    return 0;
}

int rbx_btrfs_subvolume_create(int dirfd, const char *name)
{
    struct btrfs_ioctl_vol_args_v2 args;
    memset(&args, 0, sizeof args);
    if (copy_name(args.name, sizeof args.name, name) != 0)
        return -1;
    return ioctl(dirfd, BTRFS_IOC_SUBVOL_CREATE_V2, &args);
}

int rbx_btrfs_subvolume_delete(int dirfd, const char *name)
{
    struct btrfs_ioctl_vol_args args;
    memset(&args, 0, sizeof args);
    if (copy_name(args.name, sizeof args.name, name) != 0)
        return -1;
    return ioctl(dirfd, BTRFS_IOC_SNAP_DESTROY, &args);
}

int rbx_btrfs_limit(int fd, uint64_t bytes)
{
    /* qgroupid 0: the subvolume fd is in. max_rfer: what it refers to,
     * which for a session's own files is what it takes. */
    struct btrfs_ioctl_qgroup_limit_args args = {
        .qgroupid = 0,
        .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER, .max_rfer = bytes ? bytes : (uint64_t)-1},
    };
    return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &args);
}

/* The id of the subvolume fd is in (its tree id). */
static int subvolume_id(int fd, uint64_t *id)
{
    struct btrfs_ioctl_ino_lookup_args args = {.treeid = 0,
                                               .objectid = BTRFS_FIRST_FREE_OBJECTID};
    if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args) != 0)
        return -1;
    *id = args.treeid;
    return 0;
}

int rbx_btrfs_usage(int fd, uint64_t *bytes)
{
    *bytes = 0;
    uint64_t id;
    if (subvolume_id(fd, &id) != 0)
        return -1;
    /* Level-0 quota groups are numbered like their subvolumes: the item
     * (0, QGROUP_INFO, id) of the quota tree holds its figures. */
    struct btrfs_ioctl_search_args search;
    memset(&search, 0, sizeof search);
    struct btrfs_ioctl_search_key *key = &search.key;
    key->tree_id = BTRFS_QUOTA_TREE_OBJECTID;
    key->min_type = key->max_type = BTRFS_QGROUP_INFO_KEY;
    key->min_offset = key->max_offset = id;
    key->max_transid = (uint64_t)-1;
    key->nr_items = 1;
    if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &search) != 0)
        return -1;
    if (key->nr_items < 1) {
        errno = ENOENT;
        return -1;
    }
    const struct btrfs_ioctl_search_header *header = (const void *)search.buf;
    if (header->len < sizeof(struct btrfs_qgroup_info_item)) {
        errno = EIO;
        return -1;
    }
    struct btrfs_qgroup_info_item item;
    memcpy(&item, search.buf + sizeof *header, sizeof item);
    *bytes = le64toh(item.rfer);
    return 0;
}

int rbx_btrfs_compress(int fd)
{
    static const char zstd[] = "zstd";
    return fsetxattr(fd, "btrfs.compression", zstd, sizeof zstd - 1, 0);
}
