/* Cached environments: listing them, and removing the unused ones, least
 * recently used first when their total size is over the cap. An
 * environment in use (its .use file locked by an execution) is never
 * removed. */
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "envs/deps.h"
#include "runbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int open_envs(rbx_engine *engine)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/envs", engine->state_dir);
    return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void read_env(int dirfd, const char *key, rbx_env_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->key, sizeof info->key, "%s", key);
    char path[160];
    snprintf(path, sizeof path, "%s/" RBX_ENV_META, key);
    int fd = rbx_open_regular(dirfd, path, O_RDONLY);
    json_t *meta = fd >= 0 ? json_loadfd(fd, 0, NULL) : NULL;
    if (fd >= 0)
        close(fd);
    snprintf(info->runtime, sizeof info->runtime, "%s",
             json_string_value(json_object_get(meta, "runtime")) ?: "?");
    json_t *specs = json_object_get(meta, "requirements");
    size_t i;
    json_t *spec;
    size_t at = 0;
    json_array_foreach(specs, i, spec)
    {
        at += (size_t)snprintf(info->requirements + at,
                               at < sizeof info->requirements ? sizeof info->requirements - at : 0,
                               "%s%s", i ? " " : "", json_string_value(spec) ?: "");
    }
    info->created_unix = json_integer_value(json_object_get(meta, "created"));
    json_decref(meta);
    rbx_tree_usage(dirfd, key, &info->size_bytes);
    snprintf(path, sizeof path, "%s.use", key);
    int use = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (use >= 0 && fstat(use, &st) == 0) {
        info->last_used_unix = st.st_mtim.tv_sec;
        info->in_use = flock(use, LOCK_EX | LOCK_NB) != 0;
    }
    rbx_lock_release(use);
}

rbx_status rbx_env_list(rbx_engine *engine, rbx_env_info **infos, size_t *count, rbx_error *err)
{
    *infos = NULL;
    *count = 0;
    int dirfd = open_envs(engine);
    if (dirfd < 0)
        return errno == ENOENT
                   ? RBX_OK
                   : rbx_fail(err, RBX_ESYSTEM, "cannot list environments: %s", strerror(errno));
    DIR *dir = fdopendir(dup(dirfd));
    struct dirent *entry;
    size_t cap = 0;
    while (dir && (entry = readdir(dir))) {
        if (entry->d_name[0] == '.' || entry->d_type != DT_DIR)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            rbx_env_info *grown = realloc(*infos, cap * sizeof *grown);
            if (!grown)
                break;
            *infos = grown;
        }
        read_env(dirfd, entry->d_name, &(*infos)[(*count)++]);
    }
    if (dir)
        closedir(dir);
    close(dirfd);
    return RBX_OK;
}

/* Removes one environment unless an execution uses it or installs it. */
static bool remove_env(rbx_engine *engine, int dirfd, const char *key)
{
    char name[128];
    snprintf(name, sizeof name, "%s.use", key);
    int use = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    snprintf(name, sizeof name, "%s.install", key);
    int install = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool removed = false;
    if (use >= 0 && install >= 0 && flock(use, LOCK_EX | LOCK_NB) == 0 &&
        flock(install, LOCK_EX | LOCK_NB) == 0) {
        char grave[160], suffix[RBX_SESSION_ID_MAX + 1];
        rbx_session_id_new(suffix);
        snprintf(grave, sizeof grave, "env-%s-%s", key, suffix);
        removed = renameat(dirfd, key, engine->trash_fd, grave) == 0 &&
                  rbx_remove_tree(engine->trash_fd, grave) == 0;
    }
    rbx_lock_release(use);
    rbx_lock_release(install);
    return removed;
}

static int by_last_use(const void *a, const void *b)
{
    const rbx_env_info *x = a, *y = b;
    return (x->last_used_unix > y->last_used_unix) - (x->last_used_unix < y->last_used_unix);
}

rbx_status rbx_env_gc(rbx_engine *engine, double unused_s, size_t *removed, rbx_error *err)
{
    *removed = 0;
    rbx_env_info *infos;
    size_t count;
    rbx_status status = rbx_env_list(engine, &infos, &count, err);
    int dirfd = open_envs(engine);
    if (status != RBX_OK || dirfd < 0) {
        free(infos);
        return status;
    }
    qsort(infos, count, sizeof *infos, by_last_use);
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += infos[i].size_bytes;
    int64_t now = time(NULL);
    for (size_t i = 0; i < count; i++) {
        bool idle = unused_s >= 0 && (double)(now - infos[i].last_used_unix) > unused_s;
        bool over_cap = total > engine->config.envs_cap_bytes;
        if (!infos[i].in_use && (idle || over_cap) && remove_env(engine, dirfd, infos[i].key)) {
            total -= infos[i].size_bytes;
            (*removed)++;
        }
    }
    close(dirfd);
    free(infos);
    return RBX_OK;
}
