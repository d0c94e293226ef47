/* Watching a session's directory (runbox.h) with inotify, for E2B's
 * watch_dir. Each directory is opened beneath the session by the kernel
 * (openat2, no links) and watched through its descriptor's /proc/self/fd
 * entry, so the watch is on the directory that was opened, whatever a
 * program renames or swaps in meanwhile: a link planted in the session is
 * never watched through. One inotify instance per watch, and a bounded
 * number of directories in it (WATCH_DIRS_MAX).
 *
 * Instances and watches are counted against the user's (root's) inotify
 * limits, which the host's own services share: the process keeps to a
 * budget, a quarter of max_user_instances and of max_user_watches (read
 * from /proc/sys/fs/inotify at the first watch), or what
 * RUNBOX_INOTIFY_BUDGET="<instances>,<watches>" says. A watch beyond it is
 * refused (RBX_ENOSPC, naming the budget); directories below a recursive
 * watch beyond it are left unwatched, as those beyond WATCH_DIRS_MAX.
 * Why not one instance for all watches: two watches of one directory
 * would share its watch descriptor, and removing one would end both. */
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "runbox.h"
#include "sessions/files.h"
#include "sessions/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCH_DIRS_MAX 1024
#define TAKE_MAX 4096 /* events handed out per call, so a flood cannot hold a caller */
#define WATCH_MASK                                                                         \
    (IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |         \
     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

#define INOTIFY_LIMITS "/proc/sys/fs/inotify/"
#define BUDGET_SHARE 4 /* the server takes at most 1/4 of each limit */

/* The process's inotify budget and what its watches use of it. */
static struct {
    pthread_mutex_t lock;
    pthread_once_t once;
    size_t instances, watches;           /* the budget */
    size_t used_instances, used_watches; /* what open watches hold */
} budget = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_ONCE_INIT, 0, 0, 0, 0};

/* A limit of /proc/sys/fs/inotify, or fallback when it cannot be read. */
static size_t host_limit(const char *name, size_t fallback)
{
    char path[96];
    snprintf(path, sizeof path, INOTIFY_LIMITS "%s", name);
    long long value;
    return rbx_read_number(path, &value) == 0 && value > 0 ? (size_t)value : fallback;
}

static void budget_read(void)
{
    /* The kernel's defaults when /proc cannot tell (8192 watches before 5.11). */
    size_t instances = host_limit("max_user_instances", 128);
    size_t watches = host_limit("max_user_watches", 8192);
    budget.instances = instances / BUDGET_SHARE;
    budget.watches = watches / BUDGET_SHARE;
    const char *set = getenv("RUNBOX_INOTIFY_BUDGET");
    unsigned long long i, w;
    char end;
    if (set && sscanf(set, "%llu,%llu%c", &i, &w, &end) == 2) {
        budget.instances = i < instances ? (size_t)i : instances;
        budget.watches = w < watches ? (size_t)w : watches;
    } else if (set) {
        /* An operator's setting is not dropped without a word. */
        fprintf(stderr,
                "runbox: RUNBOX_INOTIFY_BUDGET=%.40s is not <instances>,<watches> (two whole "
                "numbers); using the default, %zu,%zu\n",
                set, budget.instances, budget.watches);
    }
}

/* Takes one instance (watches 0) or one watch of the budget; false, with
 * err when given, when it is used up. */
static bool budget_take(bool instance, rbx_error *err)
{
    pthread_once(&budget.once, budget_read);
    pthread_mutex_lock(&budget.lock);
    size_t *used = instance ? &budget.used_instances : &budget.used_watches;
    size_t most = instance ? budget.instances : budget.watches;
    bool ok = *used < most;
    if (ok)
        (*used)++;
    pthread_mutex_unlock(&budget.lock);
    if (!ok && err)
        rbx_fail(err, RBX_ENOSPC,
                 "this server already holds %zu inotify %s, its budget (a quarter of the host's "
                 INOTIFY_LIMITS "max_user_%s, or RUNBOX_INOTIFY_BUDGET): stop a watch first",
                 most, instance ? "instances" : "watches", instance ? "instances" : "watches");
    return ok;
}

static void budget_give(size_t instances, size_t watches)
{
    pthread_mutex_lock(&budget.lock);
    budget.used_instances -= instances;
    budget.used_watches -= watches;
    pthread_mutex_unlock(&budget.lock);
}

typedef struct watched_dir {
    int wd;
    char *rel; /* below the watched directory ("" for itself) */
} watched_dir;

struct rbx_file_watch {
    int fd;   /* the inotify instance */
    int work; /* the session's directory (O_PATH) */
    char root[1100];
    bool recursive, gone, is_root;
    bool instance_held;  /* fd counts against the budget */
    rbx_error *refusal;  /* while opening: why the budget refused the directory */
    size_t found_left; /* what a take may still report of new directories' contents */
    watched_dir *dirs;
    size_t count, cap;
};

static watched_dir *dir_of(rbx_file_watch *w, int wd)
{
    for (size_t i = 0; i < w->count; i++)
        if (w->dirs[i].wd == wd)
            return &w->dirs[i];
    return NULL;
}

typedef void (*event_fn)(void *arg, const rbx_file_event *e);

/* Room in dirs for one more directory. */
static bool room_for_dir(rbx_file_watch *w)
{
    size_t cap = w->count < w->cap ? w->cap : w->cap ? w->cap * 2 : 16;
    watched_dir *dirs = cap == w->cap ? w->dirs : reallocarray(w->dirs, cap, sizeof *dirs);
    if (dirs) { /* unchanged when it failed */
        w->dirs = dirs;
        w->cap = cap;
    }
    return dirs != NULL;
}

/* Watches the directory rel (below the watched one), when recursive also
 * those below it: false when it cannot be opened (gone, a link). For a
 * directory made while we watch, what was made in it before its watch
 * began goes to each as CREATED, so nothing made there is missed. */
static bool add_dir(rbx_file_watch *w, const char *rel, int depth, event_fn each, void *arg)
{
    if (w->count >= WATCH_DIRS_MAX || depth > 32)
        return false;
    char path[2300];
    snprintf(path, sizeof path, "%s%s%s", w->root, w->root[0] && rel[0] ? "/" : "", rel);
    int fd =
        rbx_open_beneath(w->work, path[0] ? path : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd < 0)
        return false;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    /* Room and name first: a watch the kernel made must be kept, so that
     * what it holds of the budget is given back. */
    char *copy = strdup(rel);
    if (!copy || !room_for_dir(w) || !budget_take(false, depth ? NULL : w->refusal)) {
        free(copy);
        close(fd);
        return false;
    }
    int wd = inotify_add_watch(w->fd, proc, WATCH_MASK);
    watched_dir *known = wd < 0 ? NULL : dir_of(w, wd);
    if (wd < 0 || known)
        budget_give(0, 1); /* none made, or the same one again (a move) */
    if (wd < 0) {
        free(copy);
        close(fd);
        return false;
    }
    if (known) { /* the same directory under a new name: a move */
        free(known->rel);
        known->rel = copy;
    } else {
        w->dirs[w->count++] = (watched_dir){.wd = wd, .rel = copy};
    }
    if (w->recursive) {
        /* Directories already below it (made before we looked). */
        int list = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = list >= 0 ? fdopendir(list) : NULL;
        struct dirent *ent;
        while (d && (ent = readdir(d))) {
            if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..") ||
                !strncmp(ent->d_name, RBX_FILES_UPLOAD_PREFIX, sizeof RBX_FILES_UPLOAD_PREFIX - 1))
                continue;
            char sub[1100];
            if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", ent->d_name) >=
                sizeof sub)
                continue;
            if (each && w->found_left) {
                rbx_file_event event = {.name = sub, .change = RBX_FILE_CREATED};
                each(arg, &event);
                w->found_left--;
            }
            struct stat st;
            if (ent->d_type == DT_DIR ||
                (ent->d_type == DT_UNKNOWN &&
                 fstatat(fd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)))
                add_dir(w, sub, depth + 1, each, arg);
        }
        if (d)
            closedir(d);
        else if (list >= 0)
            close(list);
    }
    close(fd);
    return true;
}

rbx_status rbx_file_watch_open(rbx_engine *engine, const char *session_id, const char *path,
                               bool recursive, rbx_file_watch **watch, rbx_error *err)
{
    *watch = NULL;
    rbx_status status = path[0] ? rbx_file_path_check(path, err) : RBX_OK;
    if (status != RBX_OK)
        return status;
    rbx_file_watch *w = calloc(1, sizeof *w);
    if (!w)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    w->fd = w->work = -1;
    snprintf(w->root, sizeof w->root, "%s", path);
    w->recursive = recursive;
    w->is_root = engine->is_root;
    if ((status = rbx_session_work_fd(engine, session_id, &w->work, err))) {
        rbx_file_watch_close(w);
        return status;
    }
    /* Is it a directory we may watch? The same errors as a listing. */
    int probe =
        rbx_open_beneath(w->work, path[0] ? path : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (probe < 0) {
        status = errno == ENOTDIR ? rbx_fail(err, RBX_EINVAL, "%.200s is not a directory", path)
                                  : rbx_files_refused(path, err);
        rbx_file_watch_close(w);
        return status;
    }
    close(probe);
    rbx_error refusal = {0};
    w->refusal = &refusal;
    if ((w->instance_held = budget_take(true, &refusal)))
        w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0 || !add_dir(w, "", 0, NULL, NULL)) {
        status = refusal.status ? rbx_fail(err, refusal.status, "%s", refusal.message)
                                : rbx_fail(err, RBX_ESYSTEM, "cannot watch %.200s: %s",
                                           path[0] ? path : "the session directory",
                                           strerror(errno));
        rbx_file_watch_close(w);
        return status;
    }
    w->refusal = NULL;
    *watch = w;
    return RBX_OK;
}

int rbx_file_watch_fd(const rbx_file_watch *watch)
{
    return watch->fd;
}

static void forget(rbx_file_watch *w, int wd)
{
    watched_dir *d = dir_of(w, wd);
    if (!d)
        return;
    if (!d->rel[0])
        w->gone = true; /* the watched directory itself */
    free(d->rel);
    *d = w->dirs[--w->count];
    budget_give(0, 1); /* the kernel removed it */
}

static rbx_file_change change_of(uint32_t mask)
{
    if (mask & (IN_CREATE | IN_MOVED_TO))
        return RBX_FILE_CREATED;
    if (mask & IN_MODIFY)
        return RBX_FILE_WRITTEN;
    if (mask & IN_DELETE)
        return RBX_FILE_REMOVED;
    if (mask & IN_MOVED_FROM)
        return RBX_FILE_RENAMED;
    if (mask & IN_ATTRIB)
        return RBX_FILE_CHMODDED;
    return 0;
}

size_t rbx_file_watch_take(rbx_file_watch *w, event_fn each, void *arg, bool *gone)
{
    size_t handed = 0;
    w->found_left = TAKE_MAX;
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (handed < TAKE_MAX) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
                watched_dir *self = dir_of(w, ev->wd);
                if (ev->mask & IN_IGNORED)
                    forget(w, ev->wd);
                else if ((ev->mask & IN_MOVE_SELF) && self && !self->rel[0])
                    w->gone = true; /* moved away (a removed session goes to the trash so) */
                continue;
            }
            watched_dir *d = dir_of(w, ev->wd);
            rbx_file_change change = change_of(ev->mask);
            if (!d || !change || !ev->len ||
                !strncmp(ev->name, RBX_FILES_UPLOAD_PREFIX, sizeof RBX_FILES_UPLOAD_PREFIX - 1))
                continue;
            char name[2400];
            snprintf(name, sizeof name, "%s%s%s", d->rel, d->rel[0] ? "/" : "", ev->name);
            rbx_file_event event = {.name = name, .change = change};
            each(arg, &event);
            handed++;
            if (w->recursive && (ev->mask & IN_ISDIR) && change == RBX_FILE_CREATED)
                add_dir(w, name, 1, each, arg);
        }
    }
    /* rbx_file_put's temporaries are left out: an upload shows as its
     * file's CREATE (the rename onto its name). */
    *gone = w->gone;
    return handed;
}

rbx_status rbx_file_watch_stat(rbx_file_watch *w, const char *name, rbx_file_entry *entry,
                               rbx_error *err)
{
    memset(entry, 0, sizeof *entry);
    char path[2300];
    if ((size_t)snprintf(path, sizeof path, "%s%s%s", w->root, w->root[0] ? "/" : "", name) >=
        sizeof path)
        return rbx_fail(err, RBX_EINVAL, "the path is too long");
    rbx_status status = rbx_file_path_check(path, err);
    if (status != RBX_OK)
        return status;
    const char *leaf;
    /* No engine: the watch's own session descriptor is all it uses. */
    int dir = rbx_files_open_parent(NULL, w->work, path, false, &leaf);
    if (dir < 0)
        return rbx_files_refused(path, err);
    if (rbx_files_fill_entry(w->is_root, dir, leaf, path, entry) != 0)
        status = rbx_files_refused(path, err);
    close(dir);
    return status;
}

void rbx_file_watch_close(rbx_file_watch *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    budget_give(w->instance_held, w->count);
    if (w->work >= 0)
        close(w->work);
    for (size_t i = 0; i < w->count; i++)
        free(w->dirs[i].rel);
    free(w->dirs);
    free(w);
}
