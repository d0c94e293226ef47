/* Spare scratch spaces (scratch_spares.h).
 *
 * Why: an execution's scratch space is a btrfs subvolume, made with a
 * quota and its directories, and destroyed after it: three ioctls, the
 * directories and the owner, then the filesystem's cleaner and commits
 * freeing the subvolume in the background. A process that runs many
 * executions keeps the ones left exactly as they were made and gives them
 * to later executions.
 *
 * What "as made" means is what a later execution could see of an earlier
 * one in them, checked once every process that had them is gone: tmp (and
 * home) empty, with the mode and owner they were made with, no extended
 * attribute (a user.* one, an ACL) and no inode flag (chattr) on them. A
 * file made and removed leaves nothing of these; its times are set to now,
 * as a new one's are. The quota is the subvolume's and stays; what counts
 * against it must be what a new one's does (btrfs counts a removed file's
 * blocks until its next commit, which could refuse a later execution's
 * writes below its quota). Anything else makes it go as before. */
#include "sessions/scratch_spares.h"
#include "base/spares.h"
#include "engine/engine.h"
#include "sandbox/uids.h"
#include "sessions/btrfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

/* What a scratch space may count against its quota to be kept: a new one
 * counts 16 KiB (its directories). */
#define SPARE_USAGE_MAX (1u << 20)

typedef struct spare {
    char name[64];
    bool with_home;
} spare;

/* A spare holds no subvolume of its own (its directories are empty): one
 * deletion each. */
static void destroy_all(rbx_engine *engine, void **items, size_t n)
{
    while (n > 0) {
        spare *sp = items[--n];
        (void)rbx_btrfs_subvolume_delete(engine->scratch_fd, sp->name);
        free(sp);
    }
}

void rbx_scratch_keep_spares(rbx_engine *engine, size_t max)
{
    if (!engine->scratch_spares) {
        if (max == 0 || !(engine->scratch_spares = calloc(1, sizeof *engine->scratch_spares)))
            return;
        pthread_mutex_init(&engine->scratch_spares->lock, NULL);
    }
    void *drop[RBX_SPARES_MAX];
    destroy_all(engine, drop, rbx_spares_set_max(engine->scratch_spares, max, drop));
}

void rbx_scratch_prune_spares(rbx_engine *engine, int64_t idle_ms)
{
    void *drop[RBX_SPARES_MAX];
    if (engine->scratch_spares)
        destroy_all(engine, drop, rbx_spares_idle(engine->scratch_spares, idle_ms, drop));
}

void rbx_scratch_spare_counts(const rbx_engine *engine, uint64_t *kept, uint64_t *reused)
{
    *kept = *reused = 0;
    if (engine->scratch_spares)
        rbx_spares_counts(engine->scratch_spares, kept, reused);
}

static bool fits(const void *item, const void *want)
{
    return ((const spare *)item)->with_home == *(const bool *)want;
}

bool rbx_scratch_take_spare(rbx_engine *engine, bool with_home, char name[64])
{
    spare *sp = engine->scratch_spares
                    ? rbx_spares_take(engine->scratch_spares, fits, &with_home)
                    : NULL;
    if (!sp)
        return false;
    memcpy(name, sp->name, 64);
    free(sp);
    return true;
}

/* Whether the directory fd holds nothing but "." and "..". */
static bool empty_dir(int fd)
{
    char buf[512];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long at = 0; at < n;) {
            struct entry {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (void *)(buf + at);
            if (strcmp(d->name, ".") != 0 && strcmp(d->name, ".."))
                return false;
            at += d->reclen;
        }
    }
    return n == 0;
}

/* Whether dir/name is as rbx_scratch_make made it (see the top); if so,
 * its times are set to now. */
static bool as_made(int dir, const char *name, mode_t mode, uid_t owner)
{
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    int flags = -1;
    bool ok = fstat(fd, &st) == 0 && (st.st_mode & 07777) == mode && st.st_uid == owner &&
              st.st_gid == owner && flistxattr(fd, NULL, 0) == 0 &&
              ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && flags == 0 && empty_dir(fd) &&
              futimens(fd, NULL) == 0;
    close(fd);
    return ok;
}

bool rbx_scratch_keep_spare(rbx_engine *engine, const char *name, bool with_home)
{
    rbx_spares *s = engine->scratch_spares;
    if (!s || !rbx_spares_room(s))
        return false;
    uid_t root = engine->is_root ? RBX_HOST_UID_BASE : getuid();
    uid_t user = engine->is_root ? RBX_HOST_UID_BASE + RBX_SANDBOX_UID : getuid();
    int dir = openat(engine->scratch_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return false;
    uint64_t usage = UINT64_MAX;
    bool pristine = rbx_btrfs_usage(dir, &usage) == 0 && usage <= SPARE_USAGE_MAX &&
                    as_made(dir, "tmp", 01777, root) &&
                    (!with_home || as_made(dir, "home", 0700, user));
    close(dir);
    spare *sp = pristine ? calloc(1, sizeof *sp) : NULL;
    if (!sp)
        return false;
    snprintf(sp->name, sizeof sp->name, "%s", name);
    sp->with_home = with_home;
    if (rbx_spares_put(s, sp))
        return true;
    free(sp);
    return false;
}

void rbx_scratch_spares_free(rbx_engine *engine)
{
    if (!engine->scratch_spares)
        return;
    rbx_scratch_keep_spares(engine, 0);
    pthread_mutex_destroy(&engine->scratch_spares->lock);
    free(engine->scratch_spares);
    engine->scratch_spares = NULL;
}
