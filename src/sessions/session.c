/* Sessions on disk: sessions/<id>/ holds a lock file and work/, the
 * directory the code runs in. Runs in one session are serialized with
 * flock(2) on the lock file, so any number of runbox processes can share a
 * state directory. Removal renames the session into trash/ while holding
 * the lock, then deletes it without following links. */
#include "sessions/session.h"
#include "base/owner.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sessions/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_POLL_US 5000

bool rbx_session_id_valid(const char *id)
{
    if (!id || !id[0])
        return false;
    size_t len = strlen(id);
    if (len > RBX_SESSION_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

void rbx_session_id_new(char *id)
{
    unsigned char bytes[12];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
        /* getrandom cannot fail for small sizes once the pool is ready;
         * fall back to time and pid rather than fail a run. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t mix = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
        for (size_t i = 0; i < sizeof bytes; i++)
            bytes[i] = (unsigned char)(mix >> ((i % 8) * 8)) ^ (unsigned char)i;
    }
    int at = snprintf(id, RBX_SESSION_ID_MAX + 1, "rbx-");
    for (size_t i = 0; i < sizeof bytes; i++)
        at += snprintf(id + at, (size_t)(RBX_SESSION_ID_MAX + 1 - at), "%02x", bytes[i]);
}

/* The session's kernels, through what the engine wired in (see struct
 * rbx_engine's session_holders): none when nothing was. */
static size_t stop_holders(rbx_engine *engine, const char *id, const char *language)
{
    return engine->session_holders.stop ? engine->session_holders.stop(engine, id, language) : 0;
}

static int foreign_holder(rbx_engine *engine, int dir)
{
    return engine->session_holders.foreign_owner
               ? engine->session_holders.foreign_owner(engine, dir)
               : 0;
}

static void describe_holders(rbx_engine *engine, int dir, bool busy, rbx_session_info *info)
{
    if (engine->session_holders.describe)
        engine->session_holders.describe(dir, busy, info);
}

static rbx_status bad_id(rbx_error *err)
{
    return rbx_fail(err, RBX_EINVAL, "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
}

void rbx_trash_name(char *out, size_t size, const char *kind)
{
    char suffix[RBX_SESSION_ID_MAX + 1];
    rbx_session_id_new(suffix);
    /* The mark lets a later runbox remove what this one leaves if killed. */
    snprintf(out, size, "%s-%s-%s", kind, rbx_owner_mark(), suffix + 4);
}

int rbx_session_build(rbx_engine *engine, const char *temp, int64_t created, int *dir_out)
{
    *dir_out = -1;
    if (mkdirat(engine->session_trash_fd, temp, 0700) != 0)
        return -1;
    int dir =
        openat(engine->session_trash_fd, temp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return -1;
    (void)fchmod(dir, 0700); /* runbox's alone, like the whole state directory (engine.c) */
    char stamp[32];
    int len = snprintf(stamp, sizeof stamp, "%lld\n", (long long)created);
    int lock = openat(dir, "lock", O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = lock >= 0 && write(lock, stamp, (size_t)len) == len;
    if (lock >= 0)
        close(lock);
    rbx_crash_point("session-create");
    if (!ok || rbx_storage_make_work(engine, dir) != 0) {
        int saved = errno;
        close(dir);
        errno = saved;
        return -1;
    }
    *dir_out = dir;
    return 0;
}

/* Builds a complete session in the trash and renames it into place, so no
 * process ever sees a half-made session. */
static rbx_status create_session(rbx_engine *engine, const char *id, rbx_error *err)
{
    rbx_status status = rbx_storage_room(engine, err);
    if (status != RBX_OK)
        return status;
    char temp[96];
    rbx_trash_name(temp, sizeof temp, "new");
    int dir;
    if (rbx_session_build(engine, temp, time(NULL), &dir) != 0) {
        status = rbx_fail(err, errno == EDQUOT || errno == ENOSPC ? RBX_ENOSPC : RBX_ESYSTEM,
                          "cannot create session %s: %s", id, strerror(errno));
        rbx_storage_remove(engine, engine->session_trash_fd, temp);
        return status;
    }
    close(dir);
    int renamed =
        renameat2(engine->session_trash_fd, temp, engine->sessions_fd, id, RENAME_NOREPLACE);
    if (renamed != 0 && errno != EEXIST)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot create session %s: %s", id, strerror(errno));
    if (renamed != 0) /* another process won the race, or the rename failed */
        rbx_storage_remove(engine, engine->session_trash_fd, temp);
    return status;
}

bool rbx_session_exists(rbx_engine *engine, const char *id)
{
    struct stat st;
    return rbx_session_id_valid(id) &&
           fstatat(engine->sessions_fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

rbx_status rbx_session_create(rbx_engine *engine, const char *id, rbx_error *err)
{
    if (!rbx_session_id_valid(id))
        return bad_id(err);
    struct stat st;
    if (fstatat(engine->sessions_fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return RBX_OK;
    errno = 0;
    return create_session(engine, id, err);
}

/* Opens the session's directory and lock, and takes the lock within wait_s
 * seconds. Retries when the session was removed while we waited. */
static rbx_status lock_session(rbx_engine *engine, const char *id, double wait_s, bool create,
                               int cancel_fd, int *dir_out, int *lock_out, rbx_error *err)
{
    int64_t deadline = rbx_now_us() + (int64_t)(wait_s * 1e6);
    for (;;) {
        if (create) {
            rbx_status status = rbx_session_create(engine, id, err);
            if (status != RBX_OK)
                return status;
        }
        int dir = openat(engine->sessions_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0) {
            if (errno == ENOENT && create && rbx_now_us() < deadline)
                continue; /* removed right after we created it: again */
            if (errno == ENOENT)
                return rbx_fail(err, RBX_ENOENT, "no session %s", id);
            return rbx_fail(err, RBX_ESYSTEM, "cannot open session %s: %s", id, strerror(errno));
        }
        /* A directory without a lock (made by hand, or damaged) gets one, so
         * that it can be used and removed like any other session. */
        int lock = openat(dir, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lock < 0) {
            close(dir);
            return rbx_fail(err, RBX_ESYSTEM, "cannot open lock of session %s: %s", id,
                            strerror(errno));
        }
        while (flock(lock, LOCK_EX | LOCK_NB) != 0) {
            if (rbx_now_us() >= deadline) {
                close(lock);
                close(dir);
                return rbx_fail(err, RBX_EBUSY,
                                "session %s is busy: another execution is running in it", id);
            }
            /* Sleep, but wake at once if the caller gives up (a client gone). */
            struct pollfd cancel = {.fd = cancel_fd, .events = POLLIN};
            if (poll(&cancel, 1, LOCK_POLL_US / 1000) > 0) {
                close(lock);
                close(dir);
                return rbx_fail(err, RBX_EBUSY, "cancelled while waiting for session %s to be free",
                                id);
            }
        }
        /* The session may have been removed (renamed away) while we waited. */
        struct stat now, held;
        if (fstatat(engine->sessions_fd, id, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            fstat(dir, &held) == 0 && now.st_ino == held.st_ino && now.st_dev == held.st_dev) {
            *dir_out = dir;
            *lock_out = lock;
            return RBX_OK;
        }
        rbx_lock_release(lock);
        close(dir);
        if (!create)
            return rbx_fail(err, RBX_ENOENT, "no session %s", id);
        if (rbx_now_us() >= deadline)
            return rbx_fail(err, RBX_EBUSY, "session %s is being removed and recreated", id);
    }
}

rbx_status rbx_session_acquire(rbx_engine *engine, const char *id, double wait_s, int cancel_fd,
                               rbx_session *session, rbx_error *err)
{
    memset(session, 0, sizeof *session);
    session->dir_fd = session->lock_fd = -1;
    if (!id) {
        /* A one-off run keeps its files in the sandbox alone: nothing on
         * the host to create, lock or remove. */
        rbx_session_id_new(session->id);
        session->one_off = true;
        return RBX_OK;
    }
    if (!rbx_session_id_valid(id))
        return bad_id(err);
    snprintf(session->id, sizeof session->id, "%s", id);
    rbx_status status = lock_session(engine, session->id, wait_s, true, cancel_fd, &session->dir_fd,
                                     &session->lock_fd, err);
    if (status != RBX_OK)
        return status;
    (void)futimens(session->lock_fd, NULL); /* last used */
    snprintf(session->work_path, sizeof session->work_path, "%s/%s/work", engine->sessions_dir,
             session->id);
    return RBX_OK;
}

/* Moves the locked session out of sessions/ and deletes it. */
static rbx_status discard_locked(rbx_engine *engine, const char *id, rbx_error *err)
{
    char grave[128];
    rbx_trash_name(grave, sizeof grave, "old");
    if (renameat(engine->sessions_fd, id, engine->session_trash_fd, grave) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot remove session %s: %s", id, strerror(errno));
    rbx_crash_point("session-remove");
    if (rbx_storage_remove(engine, engine->session_trash_fd, grave) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "session %s removed, but deleting its files failed: %s",
                        id, strerror(errno));
    return RBX_OK;
}

void rbx_session_release(rbx_engine *engine, rbx_session *session)
{
    if (session->lock_fd < 0)
        return;
    (void)futimens(session->lock_fd, NULL);
    rbx_lock_release(session->lock_fd);
    close(session->dir_fd);
    session->lock_fd = session->dir_fd = -1;
}

rbx_status rbx_session_remove(rbx_engine *engine, const char *id, double wait_s, rbx_error *err)
{
    if (!rbx_session_id_valid(id))
        return bad_id(err);
    int dir, lock;
    rbx_status status = lock_session(engine, id, wait_s, false, -1, &dir, &lock, err);
    if (status != RBX_OK)
        return status;
    /* Its kernels and processes go first (they have its directory as
     * their home); one that another runbox process holds is that
     * process's to stop. */
    stop_holders(engine, id, NULL);
    if (engine->session_holders.stop_processes)
        engine->session_holders.stop_processes(engine, id);
    int owner = foreign_holder(engine, dir);
    int processes_lock = -1;
    if (!owner && engine->session_holders.keep_out_processes &&
        !engine->session_holders.keep_out_processes(dir, &processes_lock))
        status = rbx_fail(err, RBX_EBUSY,
                          "session %s has processes in another runbox process: remove it "
                          "through that process",
                          id);
    else if (owner)
        status = rbx_fail(err, RBX_EBUSY,
                          "session %s has a kernel in another runbox process (pid %d): remove it "
                          "through that process",
                          id, owner);
    else
        status = discard_locked(engine, id, err);
    rbx_lock_release(processes_lock);
    rbx_lock_release(lock);
    close(dir);
    return status;
}

static int64_t read_created(int dir)
{
    char buf[32] = "";
    int fd = openat(dir, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? strtoll(buf, NULL, 10) : 0;
}

/* committed: the storage was committed for this look (a listing's). */
static rbx_status info_get(rbx_engine *engine, const char *id, bool committed,
                           rbx_session_info *info, rbx_error *err)
{
    if (!rbx_session_id_valid(id))
        return bad_id(err);
    memset(info, 0, sizeof *info);
    snprintf(info->id, sizeof info->id, "%s", id);
    int dir = openat(engine->sessions_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return errno == ENOENT
                   ? rbx_fail(err, RBX_ENOENT, "no session %s", id)
                   : rbx_fail(err, RBX_ESYSTEM, "cannot open session %s: %s", id, strerror(errno));
    int lock = openat(dir, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (lock >= 0 && fstat(lock, &st) == 0) {
        info->last_used_unix = st.st_mtim.tv_sec;
        info->running = flock(lock, LOCK_SH | LOCK_NB) != 0;
    }
    rbx_lock_release(lock);
    info->created_unix = read_created(dir);
    info->disk_bytes = committed ? rbx_storage_usage_committed(engine, dir)
                                 : rbx_storage_usage(engine, dir);
    describe_holders(engine, dir, info->running, info);
    close(dir);
    return RBX_OK;
}

rbx_status rbx_session_info_get(rbx_engine *engine, const char *id, rbx_session_info *info,
                                rbx_error *err)
{
    return info_get(engine, id, false, info, err);
}

rbx_status rbx_session_ids(rbx_engine *engine, rbx_session_id **ids, size_t *count,
                           rbx_error *err)
{
    *ids = NULL;
    *count = 0;
    int fd = openat(engine->sessions_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return rbx_fail(err, RBX_ESYSTEM, "cannot list sessions in %s: %s", engine->sessions_dir,
                        strerror(errno));
    }
    size_t cap = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (!rbx_session_id_valid(entry->d_name))
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            rbx_session_id *grown = realloc(*ids, cap * sizeof **ids);
            if (!grown) {
                closedir(dir);
                free(*ids);
                *ids = NULL;
                *count = 0;
                return rbx_fail(err, RBX_ESYSTEM, "out of memory listing sessions");
            }
            *ids = grown;
        }
        /* valid: at most RBX_SESSION_ID_MAX characters */
        snprintf((*ids)[(*count)++], sizeof **ids, "%.*s", RBX_SESSION_ID_MAX, entry->d_name);
    }
    closedir(dir);
    return RBX_OK;
}

rbx_status rbx_session_list(rbx_engine *engine, rbx_session_info **infos, size_t *count,
                            rbx_error *err)
{
    *infos = NULL;
    *count = 0;
    rbx_session_id *ids;
    size_t n;
    rbx_status status = rbx_session_ids(engine, &ids, &n, err);
    if (status != RBX_OK)
        return status;
    if (n && !(*infos = malloc(n * sizeof **infos))) {
        free(ids);
        return rbx_fail(err, RBX_ESYSTEM, "out of memory listing sessions");
    }
    /* One commit for all: each session's figure is its quota group's. */
    rbx_storage_commit(engine);
    for (size_t i = 0; i < n; i++)
        if (info_get(engine, ids[i], true, &(*infos)[*count], NULL) == RBX_OK)
            (*count)++;
    free(ids);
    return RBX_OK;
}

rbx_status rbx_session_gc(rbx_engine *engine, double idle_s, size_t *removed, rbx_error *err)
{
    *removed = 0;
    rbx_session_info *infos;
    size_t count;
    rbx_status status = rbx_session_list(engine, &infos, &count, err);
    if (status != RBX_OK)
        return status;
    int64_t now = time(NULL);
    for (size_t i = 0; i < count; i++) {
        if (infos[i].running || (double)(now - infos[i].last_used_unix) <= idle_s)
            continue;
        /* wait 0: a session that started running since we looked is kept */
        if (rbx_session_remove(engine, infos[i].id, 0, NULL) == RBX_OK)
            (*removed)++;
    }
    free(infos);
    return RBX_OK;
}

rbx_status rbx_session_work_fd(rbx_engine *engine, const char *id, int *fd, rbx_error *err)
{
    *fd = -1;
    if (!rbx_session_id_valid(id))
        return bad_id(err);
    struct stat st;
    if (fstatat(engine->sessions_fd, id, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return rbx_fail(err, RBX_ENOENT, "no session %s", id);
    char rel[RBX_SESSION_ID_MAX + 8];
    snprintf(rel, sizeof rel, "%s/work", id);
    *fd = openat(engine->sessions_fd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return rbx_fail(err, errno == ENOENT ? RBX_ENOENT : RBX_ESYSTEM,
                        "cannot open session %s: %s", id, strerror(errno));
    return RBX_OK;
}

rbx_status rbx_session_dir(rbx_engine *engine, const char *id, char *path, size_t size,
                           rbx_error *err)
{
    if (!rbx_session_id_valid(id))
        return bad_id(err);
    struct stat st;
    if (fstatat(engine->sessions_fd, id, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return rbx_fail(err, RBX_ENOENT, "no session %s", id);
    snprintf(path, size, "%s/%s/work", engine->sessions_dir, id);
    return RBX_OK;
}

rbx_status rbx_session_restart(rbx_engine *engine, const char *id, const char *language,
                               size_t *stopped, rbx_error *err)
{
    *stopped = 0;
    if (!rbx_session_id_valid(id))
        return bad_id(err);
    if (language && !rbx_runtime_canonical(language))
        return rbx_unknown_language(err, language);
    const char *canonical = language ? rbx_runtime_canonical(language) : NULL;
    int dir = openat(engine->sessions_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return errno == ENOENT
                   ? rbx_fail(err, RBX_ENOENT, "no session %s", id)
                   : rbx_fail(err, RBX_ESYSTEM, "cannot open session %s: %s", id, strerror(errno));
    *stopped = stop_holders(engine, id, canonical);
    int owner = foreign_holder(engine, dir);
    close(dir);
    if (owner)
        return rbx_fail(err, RBX_EBUSY,
                        "session %s has a kernel in another runbox process (pid %d): restart it "
                        "through that process",
                        id, owner);
    return RBX_OK;
}
