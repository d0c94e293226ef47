/* Hibernation of idle kernels (see hibernation.h). */
#include "kernels/hibernation.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/nettle_lib.h"
#include "engine/engine.h"
#include "images/roots.h"
#include "sandbox/checkpoint.h"
#include "sandbox/criu.h"
#include "sessions/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <nettle/sha2.h>
#include <time.h>
#include <unistd.h>

#define RECORD RBX_CHECKPOINT_RECORD
/* Less room than this under a session's disk cap and no checkpoint is
 * tried: an idle Python kernel's takes about 7 MB. */
#define CHECKPOINT_ROOM_MIN ((uint64_t)4 << 20)

/* --- whether to ---------------------------------------------------------------------------- */

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

/* The criu to use, found and checked once per process (its check takes a
 * tenth of a second): "" where there is none that works. */
static bool probed;
static rbx_criu_support support;

static const char *criu_of(rbx_engine *engine)
{
    pthread_mutex_lock(&probe_lock);
    if (!probed) {
        rbx_criu_probe(engine->config.criu, engine->is_root, &support);
        probed = true;
    }
    pthread_mutex_unlock(&probe_lock);
    return support.ok ? support.path : "";
}

bool rbx_hibernation_enabled(rbx_engine *engine)
{
    return engine->is_root && !engine->config.hibernate_off && criu_of(engine)[0];
}

bool rbx_hibernation_known_enabled(rbx_engine *engine)
{
    pthread_mutex_lock(&probe_lock);
    bool known = probed;
    pthread_mutex_unlock(&probe_lock);
    return known && rbx_hibernation_enabled(engine);
}

/* --- where ------------------------------------------------------------------------------- */

static void dir_name(char *out, size_t size, const char *language)
{
    snprintf(out, size, "hibernated-%s", language);
}

int rbx_checkpoint_session_open(rbx_engine *engine, const char *session_id)
{
    return openat(engine->sessions_fd, session_id,
                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* --- the session's disk cap ------------------------------------------------------------------ */

/* The bytes the images of a session's checkpoints take, but except's
 * (a directory name; NULL: none excepted). */
static uint64_t checkpoints_bytes(int session, const char *except)
{
    /* Opened anew, not dup()ed: a duplicate shares the offset, and the
     * next listing would start where this one ended. */
    int fd = openat(session, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    uint64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "hibernated-", 11) || (except && !strcmp(e->d_name, except)))
            continue;
        int dir = openat(session, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        uint64_t bytes = 0;
        if (dir >= 0 && rbx_tree_usage(dir, "images", &bytes) == 0)
            sum += bytes;
        if (dir >= 0)
            close(dir);
    }
    closedir(d);
    return sum;
}

/* The session's files may take its disk cap less what its checkpoints
 * take, so that the two together never exceed it (and a checkpoint made
 * when the files left room for it keeps that room). */
static void settle_cap(rbx_engine *engine, int session)
{
    if (rbx_storage_cap_work(engine, session, checkpoints_bytes(session, NULL)) != 0 &&
        errno != ENOENT)
        fprintf(stderr, "runbox: cannot cap a session's files beside its checkpoints: %s\n",
                strerror(errno));
}

/* The room the session's files and other checkpoints leave under its
 * disk cap for a checkpoint named name; UINT64_MAX where nothing is
 * capped. */
static uint64_t checkpoint_room(rbx_engine *engine, int session, const char *name)
{
    if (!rbx_storage_capped(engine))
        return UINT64_MAX;
    uint64_t taken = rbx_storage_usage(engine, session) + checkpoints_bytes(session, name);
    uint64_t cap = engine->config.disk_cap_bytes;
    return taken < cap ? cap - taken : 0;
}

/* The images live in the session's disk cap: they get the room its files
 * and other checkpoints leave (criu's write fails beyond it), and the
 * files' cap shrinks by what they take. They are compressed by the
 * storage as it writes them back, off the checkpoint's path: a Python
 * kernel's memory image takes a quarter of its size so, which is what
 * decides how many sessions can sleep on a node's disk. */
rbx_status rbx_checkpoint_dir_make(rbx_engine *engine, int session, const char *name, int *dir,
                                   rbx_error *err)
{
    *dir = -1;
    (void)rbx_storage_remove(engine, session, name);
    uint64_t room = checkpoint_room(engine, session, name);
    if (room < CHECKPOINT_ROOM_MIN)
        return rbx_fail(err, RBX_ENOSPC,
                        "the session's files leave %llu KB of its disk cap of %llu MB, too "
                        "little for a checkpoint",
                        (unsigned long long)(room >> 10),
                        (unsigned long long)(engine->config.disk_cap_bytes >> 20));
    if (mkdirat(session, name, 0700) != 0 ||
        (*dir = openat(session, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        rbx_storage_make_capped(engine, *dir, "images", room) != 0 ||
        rbx_storage_compress(engine, *dir, "images") != 0 ||
        fchmodat(*dir, "images", 0711, 0) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot make a checkpoint's directory: %s",
                        strerror(errno));
    return RBX_OK;
}

void rbx_checkpoint_dir_remove(rbx_engine *engine, const char *session_id, const char *name)
{
    int session = rbx_checkpoint_session_open(engine, session_id);
    if (session < 0)
        return;
    if (rbx_storage_remove(engine, session, name) == 0)
        settle_cap(engine, session);
    close(session);
}

void rbx_checkpoint_dir_settle(rbx_engine *engine, int session)
{
    settle_cap(engine, session);
}

void rbx_hibernation_forget(rbx_engine *engine, const char *session_id, const char *language)
{
    int session = rbx_checkpoint_session_open(engine, session_id);
    if (session < 0)
        return;
    char name[64];
    dir_name(name, sizeof name, language);
    if (faccessat(session, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
        (void)rbx_storage_remove(engine, session, name);
        settle_cap(engine, session);
    }
    close(session);
}

/* What a kernel was started with, which its next call must ask for again:
 * the image, the requirements, the network and its narrowing, on the same
 * host kernel. Not its limits: the restored one gets the call's, as a live
 * kernel's cgroup is given them (a memory limit below what it holds fails
 * its restore, and the call gets a fresh kernel). */
static json_t *started_with(const rbx_kernel *k)
{
    struct utsname host;
    if (uname(&host) != 0)
        host.release[0] = 0;
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:s?, s:s}", "language", k->runtime->name,
                     "image", k->root->image, "digest", k->root->digest, "env", k->env_key,
                     "network", k->network, "egress", k->egress_key, "host_kernel",
                     host.release);
}

json_t *rbx_checkpoint_to_json(const rbx_checkpoint *cp)
{
    json_t *mounts = json_array();
    for (size_t i = 0; i < cp->mount_count; i++)
        json_array_append_new(mounts, json_pack("{s:s, s:b}", "inside", cp->mounts[i].inside,
                                                "dir", cp->mounts[i].is_dir));
    return json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "channel_fd", cp->channel_fd,
                     "stdout", (json_int_t)cp->stdout_pipe, "stderr", (json_int_t)cp->stderr_pipe,
                     "status", (json_int_t)cp->status_pipe, "stdin", (json_int_t)cp->stdin_pipe,
                     "tty_rdev", (json_int_t)cp->tty_rdev, "tty_dev", (json_int_t)cp->tty_dev,
                     "mounts", mounts);
}

bool rbx_checkpoint_from_json(json_t *j, rbx_checkpoint *cp, bool kernel)
{
    memset(cp, 0, sizeof *cp);
    json_t *mounts = json_object_get(j, "mounts");
    json_int_t channel = json_integer_value(json_object_get(j, "channel_fd"));
    cp->stdout_pipe = (unsigned long long)json_integer_value(json_object_get(j, "stdout"));
    cp->stderr_pipe = (unsigned long long)json_integer_value(json_object_get(j, "stderr"));
    cp->status_pipe = (unsigned long long)json_integer_value(json_object_get(j, "status"));
    cp->stdin_pipe = (unsigned long long)json_integer_value(json_object_get(j, "stdin"));
    cp->tty_rdev = (unsigned long long)json_integer_value(json_object_get(j, "tty_rdev"));
    cp->tty_dev = (unsigned long long)json_integer_value(json_object_get(j, "tty_dev"));
    /* A kernel's: its channel and its two output pipes, no stdin or
     * terminal. A command's: no channel; a terminal, or output pipes. */
    bool terminal = cp->tty_rdev != 0;
    bool shaped = kernel ? channel >= 3 && channel <= 1 << 20 && cp->stdout_pipe &&
                               cp->stderr_pipe && !cp->stdin_pipe && !terminal
                         : channel == -1 && terminal == !cp->stdout_pipe &&
                               terminal == !cp->stderr_pipe && terminal == (cp->tty_dev != 0);
    if (!json_is_array(mounts) || json_array_size(mounts) > RBX_CHECKPOINT_MOUNTS || !shaped ||
        !cp->status_pipe)
        return false;
    cp->channel_fd = (int)channel;
    size_t i;
    json_t *m;
    json_array_foreach(mounts, i, m)
    {
        const char *inside = json_string_value(json_object_get(m, "inside"));
        if (!inside || inside[0] != '/' || strlen(inside) >= RBX_ROOT_PATH_MAX ||
            strstr(inside, ".."))
            return false;
        snprintf(cp->mounts[i].inside, RBX_ROOT_PATH_MAX, "%s", inside);
        cp->mounts[i].is_dir = json_is_true(json_object_get(m, "dir"));
    }
    cp->mount_count = json_array_size(mounts);
    return true;
}

bool rbx_checkpoint_image_named(const char *name)
{
    size_t len = strlen(name);
    return name[0] != '.' && !(len > 4 && !strcmp(name + len - 4, ".log")) &&
           strcmp(name, "restored.pid");
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* SHA-256 of the images (each regular file's name and bytes, in name
 * order; criu's logs and pid file aside), in hex; *bytes their size.
 * -1 for anything but plain files, or more than max bytes. */
int rbx_checkpoint_images_digest(int dir, uint64_t max, char hex[65], uint64_t *bytes)
{
    rbx_error ignored;
    if (rbx_nettle_load(&ignored) != RBX_OK)
        return -1;
    int fd = openat(dir, "images", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char *names[512];
    size_t count = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!rbx_checkpoint_image_named(e->d_name))
            continue;
        if (count == sizeof names / sizeof names[0] || !(names[count] = strdup(e->d_name)))
            rc = -1;
        else
            count++;
    }
    qsort(names, count, sizeof names[0], by_name);
    struct sha256_ctx ctx;
    rbx_nettle->sha256_init(&ctx);
    *bytes = 0;
    static __thread unsigned char chunk[1 << 16];
    for (size_t i = 0; rc == 0 && i < count; i++) {
        int file = openat(fd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (file < 0 || fstat(file, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
            (*bytes += (uint64_t)st.st_size) > max) {
            rc = -1;
        } else {
            rbx_nettle->sha256_update(&ctx, strlen(names[i]) + 1, (const uint8_t *)names[i]);
            ssize_t n;
            while ((n = read(file, chunk, sizeof chunk)) > 0)
                rbx_nettle->sha256_update(&ctx, (size_t)n, chunk);
            rc = n < 0 ? -1 : 0;
        }
        if (file >= 0)
            close(file);
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    closedir(d);
    uint8_t digest[SHA256_DIGEST_SIZE];
    rbx_nettle->sha256_digest(&ctx, sizeof digest, digest);
    for (size_t i = 0; i < sizeof digest; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return rc;
}

uint64_t rbx_checkpoint_images_max(uint64_t memory_bytes)
{
    uint64_t memory = memory_bytes ? memory_bytes : 4ull << 30;
    return 2 * memory + (256ull << 20);
}

static uint64_t images_max(const rbx_kernel *k)
{
    return rbx_checkpoint_images_max(k->limits.memory_bytes);
}

/* Not fsync'ed: the images are not either, and a record that outlived a
 * crash without them, or them without it, wakes nothing wrong (the
 * digest, or the missing record, gives a fresh kernel). With thousands
 * of sessions in the storage an fsync here waited for btrfs's log: 117 ms
 * of a checkpoint's time (median, 10,000 sessions, strace). */
int rbx_checkpoint_record_write(int dir, json_t *record)
{
    char *text = json_dumps(record, JSON_COMPACT);
    int fd = text ? openat(dir, RECORD, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
                  : -1;
    size_t len = text ? strlen(text) : 0;
    int rc = fd >= 0 && write(fd, text, len) == (ssize_t)len ? 0 : -1;
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

/* --- to sleep ------------------------------------------------------------------------------ */

rbx_status rbx_kernel_hibernate(rbx_engine *engine, rbx_kernel *k, uint64_t *bytes, rbx_error *err)
{
    *bytes = 0;
    char why[256], name[64], images[4600];
    if (!rbx_checkpoint_possible(&k->box.sandbox, &k->spec, why, sizeof why))
        return rbx_fail(err, RBX_EINVAL, "the kernel cannot be checkpointed: %s", why);
    int session = rbx_checkpoint_session_open(engine, k->session_id);
    if (session < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open session %s: %s", k->session_id,
                        strerror(errno));
    dir_name(name, sizeof name, k->runtime->name);
    int dir = -1;
    rbx_status status = rbx_checkpoint_dir_make(engine, session, name, &dir, err);
    if (status != RBX_OK)
        goto out;
    snprintf(images, sizeof images, "%s/%s/%s/images", engine->sessions_dir, k->session_id, name);
    /* The scratch space first (its /tmp stays mounted in the tree): a
     * checkpoint that fails puts it back. */
    bool stowed = k->scratch.made;
    rbx_scratch scratch = k->scratch;
    if (rbx_scratch_stow(engine, &k->scratch, dir, "scratch") != 0) {
        status = rbx_fail(err, RBX_ESYSTEM, "cannot keep the kernel's /tmp: %s", strerror(errno));
        goto out;
    }
    rbx_checkpoint *cp = calloc(1, sizeof *cp);
    rbx_checkpoint_outside outside = {.channel_fd = k->box.channel_in_init, .stdin_fd = -1,
                                      .master_fd = -1};
    status = cp ? rbx_sandbox_checkpoint(&k->box.sandbox, &outside, criu_of(engine), images, cp,
                                         err)
                : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    char digest[65] = "";
    if (status == RBX_OK && rbx_checkpoint_images_digest(dir, images_max(k), digest, bytes) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "the kernel's checkpoint is larger than %llu MB",
                          (unsigned long long)(images_max(k) >> 20));
    if (status == RBX_OK) {
        /* Its session, the images' digest and what it was started with:
         * a restore checks all three (rbx_kernel_wake_prepare). */
        json_t *record = json_pack(
            "{s:i, s:s, s:s, s:o, s:o, s:b, s:I, s:I}", "version", 1, "session", k->session_id,
            "digest", digest, "started_with", started_with(k), "checkpoint",
            rbx_checkpoint_to_json(cp), "scratch", stowed, "at", (json_int_t)time(NULL), "calls",
            (json_int_t)k->calls);
        if (!record || rbx_checkpoint_record_write(dir, record) != 0)
            status = rbx_fail(err, RBX_ESYSTEM, "cannot write the kernel's checkpoint record: %s",
                              strerror(errno));
        json_decref(record);
    } else if (stowed && rbx_scratch_unstow(engine, dir, "scratch", &k->scratch) != 0) {
        k->scratch = scratch; /* gone with the directory below; the kernel keeps its mount */
        k->scratch.made = false;
    }
    free(cp);
out:
    if (dir >= 0)
        close(dir);
    if (status != RBX_OK)
        (void)rbx_storage_remove(engine, session, name);
    else
        settle_cap(engine, session);
    close(session);
    return status;
}

/* The first of what a kernel was started with that differs, in words;
 * NULL when none does. */
static const char *first_difference(json_t *then, json_t *now)
{
    static const char *const words[][2] = {
        {"language", "language"}, {"image", "image"}, {"digest", "image digest"},
        {"env", "requirements"}, {"network", "network"}, {"egress", "egress narrowing"},
        {"host_kernel", "host kernel"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        json_t *a = json_object_get(then, words[i][0]), *b = json_object_get(now, words[i][0]);
        if (!(a == b || (a && b && json_equal(a, b))))
            return words[i][1];
    }
    return NULL;
}

/* --- to wake ------------------------------------------------------------------------------- */

void rbx_kernel_wake_prepare(rbx_engine *engine, rbx_kernel *k, char *why, size_t why_size)
{
    why[0] = 0;
    char name[64];
    dir_name(name, sizeof name, k->runtime->name);
    int session = rbx_checkpoint_session_open(engine, k->session_id);
    int dir = session >= 0
                  ? openat(session, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                  : -1;
    json_t *record = NULL, *now = started_with(k);
    rbx_checkpoint *cp = calloc(1, sizeof *cp);
    char digest[65];
    uint64_t bytes;
    const char *differs;
    if (dir >= 0)
        record = rbx_checkpoint_record_read(dir);
    if (!rbx_hibernation_enabled(engine))
        snprintf(why, why_size, "this runbox does not restore checkpoints (see runbox check)");
    else if (!record || !cp ||
             !rbx_checkpoint_from_json(json_object_get(record, "checkpoint"), cp, true))
        snprintf(why, why_size, "its checkpoint is missing or damaged");
    else if (strcmp(json_string_value(json_object_get(record, "session")) ?: "", k->session_id) ||
             rbx_checkpoint_images_digest(dir, images_max(k), digest, &bytes) != 0 ||
             strcmp(digest, json_string_value(json_object_get(record, "digest")) ?: ""))
        snprintf(why, why_size, "its checkpoint does not match its record (changed, or another "
                                "session's)");
    else if ((differs = first_difference(json_object_get(record, "started_with"), now)))
        snprintf(why, why_size, "the checkpointed kernel had another %s than this call asks for",
                 differs);
    else if (json_is_true(json_object_get(record, "scratch")) &&
             rbx_scratch_unstow(engine, dir, "scratch", &k->scratch) != 0)
        snprintf(why, why_size, "its /tmp is missing: %s", strerror(errno));
    if (!why[0]) {
        /* The calls it ran: its next is not a new kernel's first. */
        k->calls = json_integer_value(json_object_get(record, "calls"));
        k->checkpoint = cp;
        cp = NULL;
        snprintf(k->checkpoint_dir, sizeof k->checkpoint_dir, "%s/%s/%s/images", engine->sessions_dir,
                 k->session_id, name);
    }
    free(cp);
    json_decref(record);
    json_decref(now);
    if (dir >= 0)
        close(dir);
    if (session >= 0)
        close(session);
    if (why[0])
        rbx_hibernation_forget(engine, k->session_id, k->runtime->name);
}

json_t *rbx_checkpoint_record_read(int dir)
{
    struct stat st;
    json_t *record = NULL;
    int fd = openat(dir, RECORD, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_size < RBX_CHECKPOINT_RECORD_MAX)
        record = json_loadfd(fd, 0, NULL);
    if (fd >= 0)
        close(fd);
    return record;
}

int rbx_hibernation_rebind(rbx_engine *engine, int session_dir, const char *session_id,
                           const char *language, uint64_t *bytes)
{
    char name[64];
    dir_name(name, sizeof name, language);
    int dir = openat(session_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = dir >= 0 ? rbx_open_regular(dir, RECORD, O_RDONLY) : -1;
    struct stat st;
    json_t *record = fd >= 0 && fstat(fd, &st) == 0 && st.st_size < RBX_CHECKPOINT_RECORD_MAX
                         ? json_loadfd(fd, 0, NULL)
                         : NULL;
    if (fd >= 0)
        close(fd);
    int rc = -1;
    *bytes = 0;
    if (!json_is_object(record))
        errno = EINVAL;
    else if (json_object_set_new(record, "session", json_string(session_id)) == 0 &&
        unlinkat(dir, RECORD, 0) == 0 && rbx_checkpoint_record_write(dir, record) == 0 &&
        rbx_tree_usage(dir, "images", bytes) == 0) {
        settle_cap(engine, session_dir);
        rc = 0;
    }
    json_decref(record);
    if (dir >= 0)
        close(dir);
    return rc;
}

const char *rbx_kernel_criu(rbx_engine *engine)
{
    return criu_of(engine);
}
