/* Pinned prepared namespaces (see template_pin.h). */
#include "sandbox/template_pin.h"
#include "base/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

#define PIN_PREFIX "mnt-"

int rbx_template_pin_open(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    /* An empty file until its mount is in place, or a stale one. */
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0 || fs.f_type != NSFS_MAGIC ||
        ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNS) {
        close(fd);
        return -1;
    }
    return fd;
}

int rbx_template_pin_lock(const char *dir)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* dir as a private mount of its own, where it is not one yet: a bind of a
 * namespace file is refused on a shared mount (it could propagate into the
 * namespace itself), and most hosts' root is shared. */
static int make_private(const char *dir)
{
    if (mount(dir, dir, NULL, MS_BIND, NULL) != 0)
        return -1;
    return mount(NULL, dir, NULL, MS_PRIVATE, NULL);
}

int rbx_template_pin(const char *dir, const char *name, int ns_fd)
{
    char path[4200], source[64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(source, sizeof source, "/proc/self/fd/%d", ns_fd);
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    if (mount(source, path, NULL, MS_BIND, NULL) == 0)
        return 0;
    if (errno != EINVAL || make_private(dir) != 0 ||
        mount(source, path, NULL, MS_BIND, NULL) != 0) {
        int error = errno;
        unlink(path);
        errno = error;
        return -1;
    }
    return 0;
}

uint64_t rbx_template_root_digest(const char *tree)
{
    return tree ? rbx_digest_add(RBX_DIGEST_START, tree, strlen(tree)) : RBX_DIGEST_START;
}

/* Where the name's stamp and root parts end (past their '-'), or 0. */
static size_t part_end(const char *name, int parts)
{
    const char *at = name;
    for (int i = 0; i < parts + 1; i++)
        if (!(at = strchr(at, '-')) || !*++at)
            return 0;
    return (size_t)(at - name);
}

bool rbx_template_name_replaced(const char *name, const char *kept)
{
    size_t stamp = part_end(kept, 1), root = part_end(kept, 2);
    if (!stamp || !root || strcmp(name, kept) == 0)
        return false;
    return strncmp(name, kept, stamp) != 0 || strncmp(name, kept, root) == 0 ||
           strchr(name + stamp, '-') == NULL; /* "mnt-<stamp>-<hash>": before roots were named */
}

void rbx_template_unpin(const char *dir, const char *kept)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    /* Names first, removal after: removing while reading may skip some. */
    char names[64][256];
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) && count < 64) {
        const char *n = entry->d_name;
        if (!strncmp(n, PIN_PREFIX, strlen(PIN_PREFIX)) && strlen(n) < sizeof names[0] &&
            (!kept || rbx_template_name_replaced(n, kept)))
            memcpy(names[count++], n, strlen(n) + 1);
    }
    closedir(d);
    char path[4400];
    for (size_t i = 0; i < count; i++) {
        int n = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (n < 0 || (size_t)n >= sizeof path)
            continue;
        (void)umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
        (void)unlink(path);
    }
    if (!kept)
        (void)umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW); /* EINVAL where it is not a mount */
}
