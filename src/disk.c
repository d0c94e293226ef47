/* Session disks: sparse ext4 images, loop-mounted. See disk.h for why. */
#include "disk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MKFS "/usr/sbin/mkfs.ext4"
#define IMAGE "disk.img"

bool rbx_disk_supported(const rbx_engine *engine, char *why, size_t why_size)
{
    if (!engine->is_root) {
        snprintf(why, why_size, "sessions are not size-capped: mounting a disk needs root");
        return false;
    }
    if (access("/dev/loop-control", R_OK | W_OK) != 0) {
        snprintf(why, why_size, "sessions are not size-capped: no /dev/loop-control");
        return false;
    }
    if (access(MKFS, X_OK) != 0) {
        snprintf(why, why_size, "sessions are not size-capped: %s is missing (e2fsprogs)", MKFS);
        return false;
    }
    snprintf(why, why_size, "each session is a %llu MiB loop-mounted ext4 image",
             (unsigned long long)(engine->config.disk_cap_bytes >> 20));
    return true;
}

static bool is_mounted(const char *work_path)
{
    struct stat work, parent;
    char up[4500];
    snprintf(up, sizeof up, "%s/..", work_path);
    return stat(work_path, &work) == 0 && stat(up, &parent) == 0 && work.st_dev != parent.st_dev;
}

/* The image's root belongs to the sandbox's user; it is made once per
 * session (about 10 ms), never per execution. */
static rbx_status make_image(int session_dirfd, const char *image_path, uint64_t bytes,
                             rbx_error *err)
{
    int fd =
        openat(session_dirfd, IMAGE, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        rbx_status status =
            rbx_fail(err, RBX_ESYSTEM, "cannot create the session's disk: %s", strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlinkat(session_dirfd, IMAGE, 0);
        }
        return status;
    }
    close(fd);
    char owner[80];
    snprintf(owner, sizeof owner, "root_owner=%d:%d,nodiscard", RBX_HOST_UID_BASE + RBX_SANDBOX_UID,
             RBX_HOST_UID_BASE + RBX_SANDBOX_UID);
    char *argv[] = {"mkfs.ext4",        "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", owner,
                    (char *)image_path, NULL};
    char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    pid_t pid;
    int rc = rbx_spawn_helper(MKFS, argv, envp, NULL, 0, &pid);
    int status = -1;
    if (rc == 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        unlinkat(session_dirfd, IMAGE, 0);
        return rbx_fail(err, RBX_ESYSTEM, "cannot format the session's disk with %s", MKFS);
    }
    return RBX_OK;
}

/* Attaches the image to a free loop device that detaches itself when the
 * filesystem is unmounted. */
static int attach_loop(const char *image_path, char *device, size_t size)
{
    int image = open(image_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    int loop = -1;
    for (int tries = 0; image >= 0 && control >= 0 && tries < 16; tries++) {
        int n = ioctl(control, LOOP_CTL_GET_FREE);
        if (n < 0)
            break;
        snprintf(device, size, "/dev/loop%d", n);
        loop = open(device, O_RDWR | O_CLOEXEC);
        if (loop < 0)
            break;
        struct loop_config config = {.fd = (uint32_t)image};
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (ioctl(loop, LOOP_CONFIGURE, &config) == 0)
            break;
        close(loop);
        loop = -1;
        if (errno != EBUSY)
            break; /* EBUSY: another process took this device first */
    }
    int saved = errno;
    if (image >= 0)
        close(image);
    if (control >= 0)
        close(control);
    errno = saved;
    return loop;
}

rbx_status rbx_disk_attach(rbx_engine *engine, int session_dirfd, const char *work_path,
                           rbx_error *err)
{
    if (is_mounted(work_path))
        return RBX_OK;
    char image_path[4500];
    snprintf(image_path, sizeof image_path, "%.4400s/../" IMAGE, work_path);
    struct stat st;
    bool fresh = false;
    if (fstatat(session_dirfd, IMAGE, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        rbx_status status =
            make_image(session_dirfd, image_path, engine->config.disk_cap_bytes, err);
        if (status != RBX_OK)
            return status;
        fresh = true;
    }
    char device[64];
    int loop = attach_loop(image_path, device, sizeof device);
    if (loop < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot attach the session's disk to a loop device: %s",
                        strerror(errno));
    int rc = mount(device, work_path, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "");
    int saved = errno;
    close(loop); /* the mount holds the device now; autoclear frees it on unmount */
    if (rc != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot mount the session's disk: %s", strerror(saved));
    if (fresh) {
        /* fsck's lost+found is no use here and would only puzzle the agent. */
        char lost[4500];
        snprintf(lost, sizeof lost, "%.4400s/lost+found", work_path);
        rmdir(lost);
    }
    return RBX_OK;
}

void rbx_disk_detach(const char *work_path)
{
    if (!is_mounted(work_path))
        return;
    /* Lazily: a sandbox's mount namespace that the kernel has not finished
     * tearing down may still hold a copy of this mount. */
    if (umount2(work_path, UMOUNT_NOFOLLOW) != 0)
        umount2(work_path, MNT_DETACH | UMOUNT_NOFOLLOW);
}
