/* Session storage (see storage.h).
 *
 * Why one btrfs image: the earlier layout gave each session an ext4 image
 * loop-mounted on its directory, so every session was a mount in the
 * host's table and a loop device, and every sandbox's mount namespace
 * copied all of them: 5.4 ms per execution with no sessions, 22.7 ms with
 * 2,000 idle ones. One filesystem with a quota per session keeps the host's
 * table constant. ext4 and XFS project quotas would do it too, but need a
 * kernel with quota format v2 or XFS quota support, which this kind of host
 * lacks (mounting an ext4 image with prjquota fails here); btrfs quota
 * groups work on every kernel with btrfs, and removing a subvolume is one
 * call, however many files the session holds. A tmpfs per session would
 * keep every file in memory and lose it on reboot.
 *
 * Layout: <state>/sessions.img, mounted (discard, so that deleted files
 * give their space back to the host) on <state>/sessions, which holds a
 * directory per session (its lock, and work/, the subvolume with its files),
 * .trash/ (sessions on their way in or out) and .scratch/ (executions'
 * /tmp and one-off homes). Every directory here is runbox's user's alone
 * (0700, see engine.c): a sandbox reaches its own by descriptor. */
#include "sessions/storage.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/owner.h"
#include "engine/engine.h"
#include "runbox.h"
#include "sandbox/uids.h"
#include "sessions/btrfs.h"
#include "sessions/scratch_spares.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define IMAGE "sessions.img"
#define OLD_SESSIONS RBX_OLD_SESSIONS
#define MKFS_BTRFS_PATHS                                                                           \
    {                                                                                              \
        "/usr/sbin/mkfs.btrfs", "/sbin/mkfs.btrfs", "/usr/bin/mkfs.btrfs"                          \
    }
#define MIN_IMAGE_BYTES (512ull << 20)
#define MAX_DEFAULT_IMAGE_BYTES (64ull << 30)
/* Below this much free space the storage takes no new session or run. */
#define STORAGE_RESERVE_BYTES (16ull << 20)
#define HOST_RESERVE_BYTES (64ull << 20)
/* A scratch space's /tmp in a session's run (a one-off gets the disk cap). */
#define SCRATCH_TMP_BYTES (256ull << 20)

static const char *mkfs_btrfs(void)
{
    static const char *const paths[] = MKFS_BTRFS_PATHS;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

static bool kernel_has_btrfs(void)
{
    FILE *f = fopen("/proc/filesystems", "re");
    char line[128];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "\tbtrfs\n") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Why this host cannot have capped storage, or NULL when it can. */
static const char *no_btrfs_reason(const rbx_engine *engine)
{
    if (!engine->is_root)
        return "an ordinary user cannot mount a filesystem";
    if (access("/dev/loop-control", R_OK | W_OK) != 0)
        return "no /dev/loop-control";
    if (!kernel_has_btrfs())
        return "the kernel has no btrfs";
    if (!mkfs_btrfs())
        return "mkfs.btrfs is missing (install btrfs-progs)";
    return NULL;
}

static int open_dir_at(int dirfd, const char *name)
{
    return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Whether name below dirfd is the root of a mount. */
static bool is_mount_root(int dirfd, const char *name)
{
    struct statx stx;
    if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0)
        return false;
    return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
           (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

static bool is_empty_dir(int dirfd, const char *name)
{
    int fd = open_dir_at(dirfd, name);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    struct dirent *entry;
    bool empty = true;
    while (empty && (entry = readdir(dir)))
        empty = !strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..");
    closedir(dir);
    return empty;
}

/* The default size of a new image: half the host's free space under the
 * state directory, between 512 MiB and 64 GiB. The image is sparse: it
 * takes from the host only what sessions hold. */
static uint64_t default_image_bytes(int state_fd)
{
    struct statvfs vfs;
    uint64_t free_bytes = fstatvfs(state_fd, &vfs) == 0 ? (uint64_t)vfs.f_bavail * vfs.f_frsize : 0;
    uint64_t bytes = free_bytes / 2;
    if (bytes > MAX_DEFAULT_IMAGE_BYTES)
        bytes = MAX_DEFAULT_IMAGE_BYTES;
    return bytes < MIN_IMAGE_BYTES ? MIN_IMAGE_BYTES : bytes;
}

/* Formats a new image beside the final name and renames it into place, so
 * a runbox killed meanwhile leaves no half-made image behind its name. */
static rbx_status make_image(rbx_engine *engine, int state_fd, rbx_error *err)
{
    uint64_t bytes =
        engine->config.storage_bytes ? engine->config.storage_bytes : default_image_bytes(state_fd);
    if (bytes < MIN_IMAGE_BYTES)
        return rbx_fail(err, RBX_EINVAL, "the storage size must be at least %llu MiB",
                        (unsigned long long)(MIN_IMAGE_BYTES >> 20));
    (void)unlinkat(state_fd, IMAGE ".new", 0);
    int fd =
        openat(state_fd, IMAGE ".new", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        rbx_status status = rbx_fail(err, RBX_ESYSTEM, "cannot create %s/%s: %s", engine->state_dir,
                                     IMAGE, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlinkat(state_fd, IMAGE ".new", 0);
        return status;
    }
    close(fd);
    char path[4400];
    snprintf(path, sizeof path, "%s/" IMAGE ".new", engine->state_dir);
    /* Mixed block groups: data and metadata share space, so a session that
     * filled the storage and deleted its files leaves room for metadata
     * again at once (split groups keep emptied data chunks until the
     * cleaner returns them, and report no free space meanwhile). One
     * device, one copy of metadata: a second in the same file is no use. */
    char *argv[] = {"mkfs.btrfs", "-q", "-f", "--mixed", path, NULL};
    char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    pid_t pid;
    int status = -1;
    if (rbx_spawn_helper(mkfs_btrfs(), argv, envp, NULL, 0, &pid) == 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        renameat(state_fd, IMAGE ".new", state_fd, IMAGE) != 0) {
        unlinkat(state_fd, IMAGE ".new", 0);
        return rbx_fail(err, RBX_ESYSTEM, "cannot format %s with mkfs.btrfs", path);
    }
    return RBX_OK;
}

/* Attaches the image to a free loop device that detaches itself when the
 * filesystem is unmounted; direct I/O where the kernel takes it, so the
 * image's pages are not cached twice (once as the file, once as btrfs). */
static int attach_loop(int image, char *device, size_t size)
{
    int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    int loop = -1;
    for (int tries = 0; control >= 0 && tries < 16; tries++) {
        int n = ioctl(control, LOOP_CTL_GET_FREE);
        if (n < 0)
            break;
        snprintf(device, size, "/dev/loop%d", n);
        loop = open(device, O_RDWR | O_CLOEXEC);
        if (loop < 0)
            break;
        struct loop_config config = {.fd = (uint32_t)image};
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
        if (ioctl(loop, LOOP_CONFIGURE, &config) == 0)
            break;
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (errno == EINVAL && ioctl(loop, LOOP_CONFIGURE, &config) == 0)
            break;
        close(loop);
        loop = -1;
        if (errno != EBUSY)
            break; /* EBUSY: another process took this device first */
    }
    int saved = errno;
    if (control >= 0)
        close(control);
    errno = saved;
    return loop;
}

/* Attaches the image and mounts it. The filesystem an unmount just took from
 * this namespace may still live for moments in a dying prepared namespace
 * (the kernel frees a namespace's mounts after its last process and pin are
 * gone, later on a loaded machine): btrfs then refuses a second instance of
 * the same filesystem (EIO or EBUSY). That passes, so the mount is tried
 * again for up to two seconds before the image is called damaged. */
static rbx_status mount_image(rbx_engine *engine, int state_fd, rbx_error *err)
{
    int rc = -1, saved = 0;
    for (int tries = 0; rc != 0 && tries < 40; tries++) {
        if (tries > 0)
            usleep(50 * 1000);
        int image = openat(state_fd, IMAGE, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (image < 0)
            return rbx_fail(err, RBX_ESYSTEM, "cannot open %s/%s: %s", engine->state_dir, IMAGE,
                            strerror(errno));
        char device[64];
        int loop = attach_loop(image, device, sizeof device);
        saved = errno;
        close(image);
        if (loop < 0)
            return rbx_fail(err, RBX_ESYSTEM, "cannot attach %s/%s to a loop device: %s",
                            engine->state_dir, IMAGE, strerror(saved));
        rc = mount(device, engine->sessions_dir, "btrfs", MS_NOSUID | MS_NODEV | MS_NOATIME,
                   "discard");
        saved = errno;
        /* the mount holds the device now; autoclear frees it on unmount (or
         * now, if the mount failed) */
        close(loop);
        if (rc != 0 && saved != EIO && saved != EBUSY)
            break;
    }
    if (rc != 0)
        return rbx_fail(err, RBX_ESYSTEM,
                        "cannot mount %s/%s on %s: %s (the image may be damaged: btrfs check "
                        "%s/%s)",
                        engine->state_dir, IMAGE, engine->sessions_dir, strerror(saved),
                        engine->state_dir, IMAGE);
    return RBX_OK;
}

/* Sets up the image: mounted already (another runbox did it, the mount
 * outlives processes), or mounted now, or made first. A sessions/ of the
 * earlier layout is moved aside to be migrated. Under the state lock. */
static rbx_status open_btrfs(rbx_engine *engine, int state_fd, rbx_error *err)
{
    if (is_mount_root(state_fd, "sessions")) {
        int fd = open_dir_at(state_fd, "sessions");
        bool ours = fd >= 0 && rbx_btrfs_is(fd);
        if (fd >= 0)
            close(fd);
        if (!ours)
            return rbx_fail(err, RBX_ESYSTEM,
                            "%s is a mount of something other than runbox's storage: unmount "
                            "it, or choose another --state-dir",
                            engine->sessions_dir);
        return RBX_OK;
    }
    struct stat st;
    if (fstatat(state_fd, "sessions", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !is_empty_dir(state_fd, "sessions")) {
        if (fstatat(state_fd, OLD_SESSIONS, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return rbx_fail(err, RBX_ESYSTEM,
                            "both %s and %s/" OLD_SESSIONS " hold sessions: move one away",
                            engine->sessions_dir, engine->state_dir);
        if (renameat(state_fd, "sessions", state_fd, OLD_SESSIONS) != 0)
            return rbx_fail(err, RBX_ESYSTEM, "cannot move %s aside to migrate it: %s",
                            engine->sessions_dir, strerror(errno));
    }
    if (mkdirat(state_fd, "sessions", 0700) != 0 && errno != EEXIST)
        return rbx_fail(err, RBX_ESYSTEM, "cannot create %s: %s", engine->sessions_dir,
                        strerror(errno));
    rbx_status status = RBX_OK;
    if (fstatat(state_fd, IMAGE, &st, AT_SYMLINK_NOFOLLOW) != 0)
        status = make_image(engine, state_fd, err);
    return status == RBX_OK ? mount_image(engine, state_fd, err) : status;
}

/* The storage's own directories, and quotas on. */
static rbx_status open_fds(rbx_engine *engine, int state_fd, rbx_error *err)
{
    engine->sessions_fd = open_dir_at(state_fd, "sessions");
    if (engine->sessions_fd < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open %s: %s", engine->sessions_dir,
                        strerror(errno));
    /* The root of the mounted image, or a plain directory: closed to other
     * users (earlier runbox versions left it, .trash and .scratch 0711). */
    if (fchmod(engine->sessions_fd, 0700) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot close %s to other users: %s",
                        engine->sessions_dir, strerror(errno));
    if (engine->storage == RBX_STORAGE_BTRFS && rbx_btrfs_enable_quotas(engine->sessions_fd) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot enable quotas on %s: %s", engine->sessions_dir,
                        strerror(errno));
    static const char *const dirs[] = {".trash", ".scratch"};
    int *fds[] = {&engine->session_trash_fd, &engine->scratch_fd};
    for (size_t i = 0; i < 2; i++)
        if ((*fds[i] = rbx_private_dir_at(engine->sessions_fd, dirs[i])) < 0)
            return rbx_fail(err, RBX_ESYSTEM, "cannot create %s/%s: %s", engine->sessions_dir,
                            dirs[i], strerror(errno));
    return RBX_OK;
}

rbx_status rbx_storage_open(rbx_engine *engine, rbx_error *err)
{
    engine->sessions_fd = engine->session_trash_fd = engine->scratch_fd = -1;
    int state_fd = open_dir_at(AT_FDCWD, engine->state_dir);
    if (state_fd < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open state directory %s: %s", engine->state_dir,
                        strerror(errno));
    /* Set-up and migration are serialised between runbox processes sharing
     * the state directory; the lock goes when the engine is ready. */
    int lock = rbx_lock_dir(state_fd);
    const char *reason = engine->config.storage == RBX_STORAGE_CHOOSE_PLAIN
                             ? "the operator chose plain storage"
                             : no_btrfs_reason(engine);
    if (reason && engine->config.storage == RBX_STORAGE_CHOOSE_BTRFS) {
        if (lock >= 0)
            rbx_lock_release(lock);
        close(state_fd);
        return rbx_fail(err, RBX_ESYSTEM, "btrfs storage was required, but %s", reason);
    }
    struct stat st;
    bool have_image = fstatat(state_fd, IMAGE, &st, AT_SYMLINK_NOFOLLOW) == 0;
    rbx_status status = RBX_OK;
    if (!reason || (have_image && engine->is_root)) {
        /* An image that exists must be used: plain directories instead
         * would make every session seem gone. */
        engine->storage = RBX_STORAGE_BTRFS;
        status = open_btrfs(engine, state_fd, err);
        snprintf(engine->storage_detail, sizeof engine->storage_detail,
                 "one btrfs image for all sessions (%.200s/" IMAGE
                 ", mounted once), a quota group of %llu MiB per session",
                 engine->state_dir, (unsigned long long)(engine->config.disk_cap_bytes >> 20));
    } else {
        engine->storage = RBX_STORAGE_PLAIN;
        if (mkdirat(state_fd, "sessions", 0700) != 0 && errno != EEXIST)
            status = rbx_fail(err, RBX_ESYSTEM, "cannot create %s: %s", engine->sessions_dir,
                              strerror(errno));
        snprintf(engine->storage_detail, sizeof engine->storage_detail,
                 "plain directories in %.200s: sessions are not size-capped (%s)",
                 engine->sessions_dir, reason);
    }
    if (status == RBX_OK)
        status = open_fds(engine, state_fd, err);
    if (lock >= 0)
        rbx_lock_release(lock);
    close(state_fd);
    return status;
}

void rbx_storage_info_get(rbx_engine *engine, rbx_storage_info *info)
{
    memset(info, 0, sizeof *info);
    info->capped = engine->storage == RBX_STORAGE_BTRFS;
    snprintf(info->kind, sizeof info->kind, "%s", info->capped ? "btrfs" : "plain");
    snprintf(info->detail, sizeof info->detail, "%s", engine->storage_detail);
    struct statvfs vfs;
    if (info->capped && fstatvfs(engine->sessions_fd, &vfs) == 0) {
        info->total_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
        info->used_bytes = info->total_bytes - (uint64_t)vfs.f_bfree * vfs.f_frsize;
    }
}

rbx_status rbx_sessions_unmount(rbx_engine *engine, rbx_error *err)
{
    if (engine->storage != RBX_STORAGE_BTRFS)
        return RBX_OK;
    rbx_storage_close(engine);
    int state_fd = open_dir_at(AT_FDCWD, engine->state_dir);
    int lock = state_fd >= 0 ? rbx_lock_dir(state_fd) : -1;
    rbx_status status = RBX_OK;
    /* A runbox that is on its way out (a daemon asked to stop) lets go
     * within moments: it gets a few seconds. */
    for (int tries = 0;
         umount2(engine->sessions_dir, UMOUNT_NOFOLLOW) != 0 && errno == EBUSY && tries < 100;
         tries++)
        usleep(50 * 1000);
    if (umount2(engine->sessions_dir, UMOUNT_NOFOLLOW) != 0 && errno != EINVAL)
        status = rbx_fail(err, errno == EBUSY ? RBX_EBUSY : RBX_ESYSTEM, "cannot unmount %s: %s%s",
                          engine->sessions_dir, strerror(errno),
                          errno == EBUSY ? " (code still runs in a session)" : "");
    if (lock >= 0)
        rbx_lock_release(lock);
    if (state_fd >= 0)
        close(state_fd);
    return status;
}

void rbx_storage_close(rbx_engine *engine)
{
    int *fds[] = {&engine->sessions_fd, &engine->session_trash_fd, &engine->scratch_fd};
    for (size_t i = 0; i < 3; i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

int rbx_storage_make_work(rbx_engine *engine, int session_dirfd)
{
    bool capped = engine->storage == RBX_STORAGE_BTRFS;
    if (capped ? rbx_btrfs_subvolume_create(session_dirfd, "work") != 0
               : mkdirat(session_dirfd, "work", 0700) != 0)
        return -1;
    int work = open_dir_at(session_dirfd, "work");
    int rc = work < 0 ? -1 : 0;
    rbx_crash_point("quota");
    if (rc == 0 && capped)
        rc = rbx_btrfs_limit(work, engine->config.disk_cap_bytes);
    if (rc == 0)
        rc = fchmod(work, 0700);
    if (rc == 0 && engine->is_root)
        rc = fchown(work, RBX_HOST_UID_BASE + RBX_SANDBOX_UID, RBX_HOST_UID_BASE + RBX_SANDBOX_UID);
    int saved = errno;
    if (work >= 0)
        close(work);
    errno = saved;
    return rc;
}

/* Subvolumes go in one call (their files are freed in the background);
 * what is left, or what is not a subvolume, is walked without following
 * links. A subvolume made inside one (seccomp refuses that since they
 * could escape the quota) makes the first call fail: the walk then
 * removes it as the empty directory it becomes. */
static int remove_subvolumes(int dirfd, const char *name)
{
    if (rbx_btrfs_is_subvolume(dirfd, name) && rbx_btrfs_subvolume_delete(dirfd, name) == 0)
        return 0;
    return rbx_remove_tree(dirfd, name);
}

bool rbx_storage_capped(const rbx_engine *engine)
{
    return engine->storage == RBX_STORAGE_BTRFS && engine->config.disk_cap_bytes > 0;
}

static int make_scratch_dirs(rbx_engine *engine, int dir, bool with_home);

/* A subvolume dirfd/name with a quota of bytes, runbox's alone (0700), with
 * a scratch space's tmp/ in it if asked; removed again on failure. */
static int limited_subvolume(rbx_engine *engine, int dirfd, const char *name, uint64_t bytes,
                             bool scratch_dirs)
{
    if (rbx_btrfs_subvolume_create(dirfd, name) != 0)
        return -1;
    int dir = open_dir_at(dirfd, name);
    int rc = dir >= 0 && rbx_btrfs_limit(dir, bytes) == 0 &&
                     (scratch_dirs ? make_scratch_dirs(engine, dir, false) : fchmod(dir, 0700)) == 0
                 ? 0
                 : -1;
    int saved = errno;
    if (dir >= 0)
        close(dir);
    if (rc != 0)
        (void)remove_subvolumes(dirfd, name);
    errno = saved;
    return rc;
}

int rbx_storage_make_capped(rbx_engine *engine, int dirfd, const char *name, uint64_t bytes)
{
    if (!rbx_storage_capped(engine))
        return mkdirat(dirfd, name, 0700);
    return limited_subvolume(engine, dirfd, name, bytes ? bytes : 1, false);
}

int rbx_storage_compress(rbx_engine *engine, int dirfd, const char *name)
{
    if (engine->storage != RBX_STORAGE_BTRFS)
        return 0;
    int dir = open_dir_at(dirfd, name);
    int rc = dir >= 0 ? rbx_btrfs_compress(dir) : -1;
    int saved = errno;
    if (dir >= 0)
        close(dir);
    errno = saved;
    return rc;
}

int rbx_storage_cap_work(rbx_engine *engine, int session_dirfd, uint64_t taken)
{
    if (!rbx_storage_capped(engine))
        return 0;
    uint64_t cap = engine->config.disk_cap_bytes;
    int work = open_dir_at(session_dirfd, "work");
    /* Never 0 (which means no cap): a session whose checkpoints take its
     * whole cap keeps a byte, and can write nothing. */
    int rc = work >= 0 ? rbx_btrfs_limit(work, taken < cap ? cap - taken : 1) : -1;
    int saved = errno;
    if (work >= 0)
        close(work);
    errno = saved;
    return rc;
}

int rbx_storage_remove(rbx_engine *engine, int dirfd, const char *name)
{
    if (engine->storage != RBX_STORAGE_BTRFS)
        return rbx_remove_tree(dirfd, name);
    int dir = open_dir_at(dirfd, name);
    if (dir >= 0) {
        /* A session's files, a scratch space's parts, a checkpoint's
         * images and stowed scratch (kernels/hibernation.c). */
        static const char *const parts[] = {"work", "tmp", "home", "images", "scratch"};
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            if (rbx_btrfs_is_subvolume(dir, parts[i]))
                (void)remove_subvolumes(dir, parts[i]);
        close(dir);
    }
    return remove_subvolumes(dirfd, name);
}

void rbx_storage_commit(rbx_engine *engine)
{
    if (engine->storage == RBX_STORAGE_BTRFS)
        (void)syncfs(engine->sessions_fd);
}

uint64_t rbx_storage_usage_committed(rbx_engine *engine, int session_dirfd)
{
    uint64_t bytes = 0;
    if (engine->storage == RBX_STORAGE_BTRFS) {
        int work = open_dir_at(session_dirfd, "work");
        int rc = work >= 0 ? rbx_btrfs_usage(work, &bytes) : -1;
        if (work >= 0)
            close(work);
        if (rc == 0)
            return bytes;
    }
    rbx_tree_usage(session_dirfd, "work", &bytes);
    return bytes;
}

/* Past this many entries a session's files are not looked over for a
 * recent change: the storage is committed instead. A walk of this many
 * costs about 18 ms (bench/sessions_scale.py, the usage rows). */
#define SETTLED_WALK_ENTRIES_MAX 10000
/* btrfs's commit interval, as runbox mounts the storage (its default). */
#define BTRFS_COMMIT_S 30

/* How long after a change to a file its quota group may still not count
 * it: written back once dirty_expire old (the flusher looks every
 * dirty_writeback), counted by the commit that follows, and as much again
 * for a host that is slow at it. 0 where writeback is not periodic. */
static time_t settle_seconds(void)
{
    long long expire, every;
    if (rbx_read_number("/proc/sys/vm/dirty_expire_centisecs", &expire) != 0 ||
        rbx_read_number("/proc/sys/vm/dirty_writeback_centisecs", &every) != 0 || expire < 0 ||
        every <= 0)
        return 0;
    return (time_t)(2 * ((expire + every) / 100 + 1 + BTRFS_COMMIT_S));
}

uint64_t rbx_storage_usage(rbx_engine *engine, int session_dirfd)
{
    /* Quota groups are brought up to date when a transaction commits. A
     * commit (syncfs) writes every session's pending data, 183 ms each
     * with 10,000 sessions: made only when this session's files changed
     * recently enough that the last commits may not have counted it.
     * Not seen: an fallocate within a file's size leaves its ctime, and
     * its blocks count from the next commit (30 s at most): the figure
     * may be that much short until then. */
    time_t settle = engine->storage == RBX_STORAGE_BTRFS ? settle_seconds() : 0;
    if (settle == 0 || !rbx_tree_unchanged_since(session_dirfd, "work", time(NULL) - settle,
                                                 SETTLED_WALK_ENTRIES_MAX))
        rbx_storage_commit(engine);
    return rbx_storage_usage_committed(engine, session_dirfd);
}

rbx_status rbx_storage_room(rbx_engine *engine, rbx_error *err)
{
    if (engine->storage != RBX_STORAGE_BTRFS)
        return RBX_OK; /* the host's own filesystem: nothing is capped (runbox check says so) */
    struct statvfs inside, host;
    if (fstatvfs(engine->sessions_fd, &inside) != 0 || statvfs(engine->state_dir, &host) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot measure the free space of %s: %s",
                        engine->state_dir, strerror(errno));
    uint64_t free_inside = (uint64_t)inside.f_bavail * inside.f_frsize;
    /* btrfs frees what was deleted when its transaction commits: commit
     * before saying the storage is full. */
    if (free_inside < STORAGE_RESERVE_BYTES && syncfs(engine->sessions_fd) == 0 &&
        fstatvfs(engine->sessions_fd, &inside) == 0)
        free_inside = (uint64_t)inside.f_bavail * inside.f_frsize;
    uint64_t size_inside = (uint64_t)inside.f_blocks * inside.f_frsize;
    if (free_inside < STORAGE_RESERVE_BYTES)
        return rbx_fail(err, RBX_ENOSPC,
                        "the sessions' storage is full (%" PRIu64 " MiB of %" PRIu64
                        " MiB used): remove sessions, or give a larger --storage-size to a new "
                        "state directory",
                        (size_inside - free_inside) >> 20, size_inside >> 20);
    /* The image grows on the host as sessions write: keep room there for
     * what one more execution may write, or a full host disk would fail
     * writes under the image instead of in the session. */
    uint64_t most = engine->config.disk_cap_bytes + SCRATCH_TMP_BYTES;
    uint64_t need = (free_inside < most ? free_inside : most) + HOST_RESERVE_BYTES;
    uint64_t free_host = (uint64_t)host.f_bavail * host.f_frsize;
    if (free_host < need)
        return rbx_fail(err, RBX_ENOSPC,
                        "the host's disk under %s has %" PRIu64 " MiB free; runbox keeps %" PRIu64
                        " MiB free there, so that what sessions write cannot fill it: free some "
                        "space on the host",
                        engine->state_dir, free_host >> 20, need >> 20);
    return RBX_OK;
}

static void random_hex(char *out, size_t size)
{
    unsigned char bytes[8];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
        memset(bytes, 0x5a, sizeof bytes);
    size_t at = 0;
    for (size_t i = 0; i < sizeof bytes && at + 3 <= size; i++)
        at += (size_t)snprintf(out + at, size - at, "%02x", bytes[i]);
}

/* The scratch's directories: tmp/ the sandbox's /tmp (its root's, sticky),
 * home/ a one-off run's home (its user's). The top, which btrfs makes 0755
 * for a new subvolume, is runbox's alone: its /tmp (1777) would otherwise
 * be one name away from any user who learned it (a sandbox's mount table
 * shows it). */
static int make_scratch_dirs(rbx_engine *engine, int dir, bool with_home)
{
    uid_t root = RBX_HOST_UID_BASE, user = RBX_HOST_UID_BASE + RBX_SANDBOX_UID;
    if (fchmod(dir, 0700) != 0 || mkdirat(dir, "tmp", 0700) != 0 ||
        fchmodat(dir, "tmp", 01777, 0) != 0 ||
        (engine->is_root && fchownat(dir, "tmp", root, root, AT_SYMLINK_NOFOLLOW) != 0))
        return -1;
    if (with_home && (mkdirat(dir, "home", 0700) != 0 ||
                      (engine->is_root && fchownat(dir, "home", user, user, AT_SYMLINK_NOFOLLOW))))
        return -1;
    return 0;
}

/* Who made a scratch space: the pid of the runbox process, in an attribute
 * of its subvolume rather than in its name. A sandbox's mount table shows
 * the path of its /tmp and home within the storage (the kernel prints a
 * bind's path in its filesystem, and btrfs its subvolume's), and the
 * server's pid is none of the sandbox's business. */
#define SCRATCH_OWNER "trusted.runbox.owner"
#define SCRATCH_OWNER_START "trusted.runbox.owner_start"
/* An owner is written moments after its subvolume is made: one without
 * (its maker died in between) is a leftover once it is this old. */
#define SCRATCH_UNOWNED_SECONDS 60

static int set_scratch_owner(int dir)
{
    char pid[16], start[24];
    int len = snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (fsetxattr(dir, SCRATCH_OWNER, pid, (size_t)len, 0) != 0)
        return -1;
    /* Its start beside (base/owner.h), in an attribute of its own: a runbox
     * from before it reads the owner as a pid alone, and would take any
     * other text for no owner, and the space for a leftover. */
    unsigned long long ticks = rbx_owner_start();
    len = snprintf(start, sizeof start, "%llu", ticks);
    return ticks ? fsetxattr(dir, SCRATCH_OWNER_START, start, (size_t)len, 0) : 0;
}

/* The owner of a scratch space (false: none written). */
static bool scratch_owner(int scratch_fd, const char *name, rbx_owner_id *id)
{
    /* By path through the directory's descriptor: one system call where
     * opening the entry, reading and closing took three, for each of a
     * busy host's scratch spaces at each runbox's start. lgetxattr follows
     * no link the entry may be. */
    char path[192], text[24], start[24];
    ssize_t n = snprintf(path, sizeof path, "/proc/self/fd/%d/%.128s", scratch_fd, name) <
                        (int)sizeof path
                    ? lgetxattr(path, SCRATCH_OWNER, text, sizeof text - 1)
                    : -1;
    if (n <= 0)
        return false;
    text[n] = 0;
    if (strchr(text, '-') || !rbx_owner_parse(text, id))
        return false;
    ssize_t m = lgetxattr(path, SCRATCH_OWNER_START, start, sizeof start - 1);
    if (m > 0) {
        start[m] = 0;
        char *end;
        unsigned long long ticks = strtoull(start, &end, 10);
        id->start = *end == 0 ? ticks : 0;
    }
    return true;
}

static void scratch_paths(rbx_engine *engine, rbx_scratch *scratch, bool with_home)
{
    snprintf(scratch->tmp_path, sizeof scratch->tmp_path, "%s/.scratch/%s/tmp",
             engine->sessions_dir, scratch->name);
    if (with_home)
        snprintf(scratch->home_path, sizeof scratch->home_path, "%s/.scratch/%s/home",
                 engine->sessions_dir, scratch->name);
}

rbx_status rbx_scratch_make(rbx_engine *engine, bool with_home, rbx_scratch *scratch,
                            rbx_error *err)
{
    memset(scratch, 0, sizeof *scratch);
    if (engine->storage != RBX_STORAGE_BTRFS)
        return RBX_OK;
    if (rbx_scratch_take_spare(engine, with_home, scratch->name)) {
        scratch->made = true;
        scratch_paths(engine, scratch, with_home);
        return RBX_OK;
    }
    random_hex(scratch->name, sizeof scratch->name);
    if (rbx_btrfs_subvolume_create(engine->scratch_fd, scratch->name) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot create the execution's scratch space: %s",
                        strerror(errno));
    scratch->made = true;
    int dir = open_dir_at(engine->scratch_fd, scratch->name);
    uint64_t cap = with_home ? engine->config.disk_cap_bytes : SCRATCH_TMP_BYTES;
    if (dir < 0 || set_scratch_owner(dir) != 0 || rbx_btrfs_limit(dir, cap) != 0 ||
        make_scratch_dirs(engine, dir, with_home)) {
        rbx_status status = rbx_fail(
            err, RBX_ESYSTEM, "cannot prepare the execution's scratch space: %s", strerror(errno));
        if (dir >= 0)
            close(dir);
        rbx_scratch_remove(engine, scratch);
        return status;
    }
    close(dir);
    scratch_paths(engine, scratch, with_home);
    return RBX_OK;
}

int rbx_scratch_stow(rbx_engine *engine, rbx_scratch *scratch, int dirfd, const char *name)
{
    if (!scratch->made)
        return 0;
    if (renameat(engine->scratch_fd, scratch->name, dirfd, name) != 0)
        return -1;
    scratch->made = false;
    return 0;
}

int rbx_scratch_stowed_make(rbx_engine *engine, int dirfd, const char *name)
{
    if (engine->storage != RBX_STORAGE_BTRFS) {
        errno = ENOTSUP; /* no scratch spaces here to take it back into */
        return -1;
    }
    return limited_subvolume(engine, dirfd, name, SCRATCH_TMP_BYTES, true);
}

int rbx_scratch_unstow(rbx_engine *engine, int dirfd, const char *name, rbx_scratch *scratch)
{
    rbx_scratch back = {.made = true};
    random_hex(back.name, sizeof back.name);
    if (renameat(dirfd, name, engine->scratch_fd, back.name) != 0)
        return -1;
    /* This process owns it now: the one that stowed it may be gone, and a
     * sweep would take a live kernel's /tmp for its leftover. */
    int dir = open_dir_at(engine->scratch_fd, back.name);
    int rc = dir >= 0 ? set_scratch_owner(dir) : -1;
    if (dir >= 0)
        close(dir);
    if (rc != 0) {
        int saved = errno;
        (void)renameat(engine->scratch_fd, back.name, dirfd, name);
        errno = saved;
        return -1;
    }
    scratch_paths(engine, &back, false);
    *scratch = back;
    return 0;
}

void rbx_scratch_remove(rbx_engine *engine, rbx_scratch *scratch)
{
    if (scratch->made && !rbx_scratch_keep_spare(engine, scratch->name, scratch->home_path[0]))
        (void)remove_subvolumes(engine->scratch_fd, scratch->name);
    scratch->made = false;
}

/* The mark in a leftover's name: after the kind of a trash entry
 * ("new-<mark>-...", "old-...", "mig-..."), or at its start (an older
 * runbox's scratch space, "<pid>-..."). */
static bool leftover_owner(const char *name, rbx_owner_id *id)
{
    static const char *const kinds[] = {"new-", "old-", "mig-"};
    for (size_t i = 0; i < 3; i++)
        if (!strncmp(name, kinds[i], 4))
            return rbx_owner_parse(name + 4, id);
    return rbx_owner_parse(name, id) && strchr(name, '-') != NULL;
}

/* Removes the entries of dirfd that a runbox which is gone left there. */
static void sweep_dir(rbx_engine *engine, int dirfd)
{
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return;
    }
    /* Names first, removal after: removing while reading would skip some. */
    char(*names)[128] = NULL;
    size_t count = 0, cap = 0;
    rbx_owner_memo owners = {0};
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        struct stat st;
        if (entry->d_name[0] == '.' || strlen(entry->d_name) >= 128 ||
            fstatat(dirfd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        rbx_owner_id owner;
        bool owned = leftover_owner(entry->d_name, &owner) ||
                     (dirfd == engine->scratch_fd && scratch_owner(dirfd, entry->d_name, &owner));
        bool gone = owned ? rbx_owner_state_id(&owners, &owner, st.st_ctim.tv_sec) ==
                                RBX_OWNER_GONE
                          : dirfd == engine->scratch_fd &&
                                time(NULL) - st.st_ctim.tv_sec > SCRATCH_UNOWNED_SECONDS;
        if (!gone)
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            char(*grown)[128] = realloc(names, cap * sizeof *names);
            if (!grown)
                break;
            names = grown;
        }
        memcpy(names[count++], entry->d_name, strlen(entry->d_name) + 1);
    }
    closedir(dir);
    for (size_t i = 0; i < count; i++)
        (void)rbx_storage_remove(engine, dirfd, names[i]);
    free(names);
}

void rbx_storage_sweep(rbx_engine *engine)
{
    if (engine->session_trash_fd >= 0)
        sweep_dir(engine, engine->session_trash_fd);
    if (engine->scratch_fd >= 0)
        sweep_dir(engine, engine->scratch_fd);
}
