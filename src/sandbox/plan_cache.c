/* Roots' plans kept for the next process. See plan_cache.h. */
#include "sandbox/plan_cache.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "runbox.h"
#include "sandbox/template_pin.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define PREFIX "plan-"

/* Written before the plan: a plan is plain data whose layout is this
 * build's, so an entry is read only by the build that wrote it. */
typedef struct entry_header {
    char magic[8];
    uint64_t plan_size;
    char version[48];
} entry_header;

static const char magic[8] = "rbxplan";

static void header_fill(entry_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, magic, sizeof magic);
    h->plan_size = sizeof(rbx_root_plan);
    snprintf(h->version, sizeof h->version, "%s", RBX_VERSION);
}

void rbx_plan_cache_name(char out[RBX_PLAN_CACHE_NAME_MAX], time_t stamp, const char *tree,
                         size_t home_size_mb)
{
    uint64_t root = rbx_template_root_digest(tree);
    uint64_t key = rbx_digest_add(RBX_DIGEST_START, &home_size_mb, sizeof home_size_mb);
    entry_header h;
    header_fill(&h);
    key = rbx_digest_add(key, &h, sizeof h);
    /* runbox-init is copied into every root (mount.c: plan_init) */
    char init[4096];
    struct stat st;
    if (rbx_program_beside("runbox-init", init, sizeof init) == 0 && stat(init, &st) == 0) {
        const uint64_t parts[] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
                                  (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec};
        key = rbx_digest_add(key, parts, sizeof parts);
    }
    /* The /proc entries a sandbox's /proc covers are the ones this kernel has. */
    struct utsname u;
    if (uname(&u) == 0) {
        key = rbx_digest_add(key, u.release, strlen(u.release));
        key = rbx_digest_add(key, u.version, strlen(u.version));
    }
    snprintf(out, RBX_PLAN_CACHE_NAME_MAX, PREFIX "%lld-%016llx-%016llx", (long long)stamp,
             (unsigned long long)root, (unsigned long long)key);
}

static bool terminated(const char *text, size_t size)
{
    return memchr(text, 0, size) != NULL;
}

/* Everything a sandbox's builder would trust in it, bounded. */
static bool plan_sound(const rbx_root_plan *p)
{
    if (p->count > RBX_ROOT_MAX_STEPS || p->mask_count > RBX_PROC_MASKS_MAX ||
        p->point_count > RBX_ROOT_MAX_POINTS || !terminated(p->tree, sizeof p->tree))
        return false;
    for (size_t i = 0; i < p->count; i++) {
        const rbx_root_step *s = &p->steps[i];
        if ((s->kind != ROOT_BIND_RO && s->kind != ROOT_COPY && s->kind != ROOT_SYMLINK) ||
            !terminated(s->host, sizeof s->host) || !terminated(s->inside, sizeof s->inside) ||
            s->inside[0] != '/')
            return false;
    }
    for (size_t i = 0; i < p->mask_count; i++)
        if (!terminated(p->masks[i].name, sizeof p->masks[i].name))
            return false;
    for (size_t i = 0; i < p->point_count; i++)
        if (!terminated(p->points[i], sizeof p->points[i]) || p->points[i][0] != '/')
            return false;
    return true;
}

bool rbx_plan_cache_load(const char *dir, const char *name, rbx_root_plan *plan)
{
    char path[4400];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return false;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    entry_header h, want;
    header_fill(&want);
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
              !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
              (uint64_t)st.st_size == sizeof h + sizeof *plan && rbx_read_all(fd, &h, sizeof h) == 0 &&
              !memcmp(&h, &want, sizeof h) && rbx_read_all(fd, plan, sizeof *plan) == 0 &&
              plan_sound(plan);
    close(fd);
    return ok;
}

/* The entries kept replaces (rbx_template_name_replaced), whole or
 * half-written (".<name>.<pid>"). */
static void remove_others(const char *dir, const char *kept)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    int dfd = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name + (e->d_name[0] == '.');
        if (!strncmp(n, PREFIX, strlen(PREFIX)) && rbx_template_name_replaced(n, kept))
            (void)unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

void rbx_plan_cache_store(const char *dir, const char *name, const rbx_root_plan *plan)
{
    char path[4400], part[4450];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
        snprintf(part, sizeof part, "%s/.%s.%d", dir, name, (int)getpid()) >= (int)sizeof part)
        return;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) /* the first run's: no namespace is pinned yet */
        return;
    int fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    entry_header h;
    header_fill(&h);
    bool ok = rbx_write_all(fd, &h, sizeof h) == 0 && rbx_write_all(fd, plan, sizeof *plan) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(part, path) != 0) {
        (void)unlink(part);
        return;
    }
    remove_others(dir, name);
}
