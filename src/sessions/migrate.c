/* Migrating a state directory of the earlier layout (sessions/storage.h): each
 * session was a directory holding its lock, work/ and, as root, disk.img,
 * an ext4 image loop-mounted on work/. Each session is copied, whole, into
 * a new session built in the trash, which is then renamed into place; the
 * old one goes last. A migration cut short (a crash, a full disk) resumes
 * where it stopped: a session already in place is not copied again. */
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "runbox.h"
#include "sessions/session.h"
#include "sessions/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OLD_IMAGE "disk.img"

static int64_t old_created(int dir)
{
    char buf[32] = "";
    int fd = rbx_open_regular(dir, "lock", O_RDONLY);
    if (fd < 0)
        return time(NULL);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    long long created = n > 0 ? strtoll(buf, NULL, 10) : 0;
    return created > 0 ? created : time(NULL);
}

/* Mounts an old session's image read-only on its work/ unless mounted. */
static int mount_old_image(const char *session_path, int dir, bool *mounted)
{
    *mounted = false;
    struct stat work, top;
    if (fstatat(dir, "work", &work, AT_SYMLINK_NOFOLLOW) == 0 && fstat(dir, &top) == 0 &&
        work.st_dev != top.st_dev)
        return 0; /* mounted by the earlier runbox still */
    int image = openat(dir, OLD_IMAGE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (image < 0)
        return errno == ENOENT ? 0 : -1; /* no image: plain files in work/ */
    int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    int loop = -1, rc = -1;
    char device[64], work_path[4500];
    for (int tries = 0; control >= 0 && loop < 0 && tries < 16; tries++) {
        int n = ioctl(control, LOOP_CTL_GET_FREE);
        snprintf(device, sizeof device, "/dev/loop%d", n);
        if (n < 0 || (loop = open(device, O_RDWR | O_CLOEXEC)) < 0)
            break;
        struct loop_config config = {.fd = (uint32_t)image};
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_READ_ONLY;
        if (ioctl(loop, LOOP_CONFIGURE, &config) != 0) {
            close(loop);
            loop = -1;
        }
    }
    snprintf(work_path, sizeof work_path, "%s/work", session_path);
    if (loop >= 0) {
        rc = mount(device, work_path, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV, "");
        *mounted = rc == 0;
        close(loop);
    }
    if (control >= 0)
        close(control);
    close(image);
    return rc;
}

static void unmount_old(const char *session_path)
{
    char work_path[4500];
    snprintf(work_path, sizeof work_path, "%s/work", session_path);
    if (umount2(work_path, UMOUNT_NOFOLLOW) != 0)
        umount2(work_path, MNT_DETACH | UMOUNT_NOFOLLOW);
}

/* Copies one old session into place as id. */
static rbx_status migrate_one(rbx_engine *engine, int old_fd, const char *old_path,
                              const char *id, rbx_error *err)
{
    struct stat st;
    if (fstatat(engine->sessions_fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return RBX_OK; /* moved before a crash: only the old copy is left to remove */
    int old = openat(old_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (old < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open %s/%s: %s", old_path, id, strerror(errno));
    char session_path[4400], temp[128];
    snprintf(session_path, sizeof session_path, "%s/%s", old_path, id);
    bool mounted = false;
    rbx_status status = RBX_OK;
    int dir = -1;
    if (mount_old_image(session_path, old, &mounted) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot mount the disk of session %s to migrate it: %s",
                          id, strerror(errno));
    rbx_trash_name(temp, sizeof temp, "mig");
    if (status == RBX_OK && rbx_session_build(engine, temp, old_created(old), &dir) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot create session %s to migrate it: %s", id,
                          strerror(errno));
    int from = status == RBX_OK ? openat(old, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW) : -1;
    int to = status == RBX_OK ? openat(dir, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW) : -1;
    if (status == RBX_OK && from >= 0 && to >= 0 && rbx_copy_tree(from, to) != 0)
        status = rbx_fail(err, errno == EDQUOT || errno == ENOSPC ? RBX_ENOSPC : RBX_ESYSTEM,
                          "cannot copy the files of session %s: %s", id, strerror(errno));
    if (status == RBX_OK && renameat(engine->session_trash_fd, temp, engine->sessions_fd, id) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot put migrated session %s in place: %s", id,
                          strerror(errno));
    if (status != RBX_OK && dir >= 0)
        rbx_storage_remove(engine, engine->session_trash_fd, temp);
    int fds[] = {from, to, dir, old};
    for (size_t i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (mounted || status == RBX_OK)
        unmount_old(session_path);
    return status;
}

static rbx_status migrate_sessions(rbx_engine *engine, int old_fd, const char *old_path,
                                  rbx_error *err)
{
    int fd = fcntl(old_fd, F_DUPFD_CLOEXEC, 0);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return rbx_fail(err, RBX_ESYSTEM, "cannot read %s: %s", old_path, strerror(errno));
    }
    rbx_status status = RBX_OK;
    struct dirent *entry;
    char (*ids)[RBX_SESSION_ID_MAX + 1] = NULL;
    size_t count = 0, cap = 0;
    while ((entry = readdir(dir)))
        if (rbx_session_id_valid(entry->d_name)) {
            if (count == cap) {
                cap = cap ? cap * 2 : 64;
                char(*grown)[RBX_SESSION_ID_MAX + 1] = realloc(ids, cap * sizeof *ids);
                if (!grown)
                    break;
                ids = grown;
            }
            snprintf(ids[count++], sizeof ids[0], "%.64s", entry->d_name);
        }
    closedir(dir);
    for (size_t i = 0; i < count && status == RBX_OK; i++) {
        status = migrate_one(engine, old_fd, old_path, ids[i], err);
        rbx_crash_point("migrate");
        if (status == RBX_OK && rbx_remove_tree(old_fd, ids[i]) != 0)
            status = rbx_fail(err, RBX_ESYSTEM, "migrated session %s, but cannot remove %s/%s: %s",
                              ids[i], old_path, ids[i], strerror(errno));
    }
    free(ids);
    return status;
}

rbx_status rbx_migrate_old_sessions(rbx_engine *engine, rbx_error *err)
{
    /* Every engine start passes here, the CLI's too: without old sessions
     * (nearly always) no lock is taken. rbx_storage_open makes the old
     * directory, under the lock, before any process gets here, and never
     * after the layout is converted, so an unlocked look is enough. */
    char old_dir[4300];
    snprintf(old_dir, sizeof old_dir, "%s/" RBX_OLD_SESSIONS, engine->state_dir);
    if (access(old_dir, F_OK) != 0 && errno == ENOENT)
        return RBX_OK;
    int state_fd = open(engine->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (state_fd < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open %s: %s", engine->state_dir,
                        strerror(errno));
    int lock = rbx_lock_dir(state_fd);
    rbx_status status = RBX_OK;
    int old = openat(state_fd, RBX_OLD_SESSIONS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (old >= 0) {
        status = migrate_sessions(engine, old, old_dir, err);
        close(old);
        /* Whatever else it held (no session) stays for the operator. */
        if (status == RBX_OK)
            (void)unlinkat(state_fd, RBX_OLD_SESSIONS, AT_REMOVEDIR);
    }
    if (lock >= 0)
        rbx_lock_release(lock);
    close(state_fd);
    return status;
}
