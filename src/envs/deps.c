/* Dependencies: an execution's requirements, installed once into a cached
 * environment and reused.
 *
 * The normalized, sorted requirements with the runtime and its version name
 * one environment: envs/<key>/ under the state directory, with <key>.use
 * (held shared while an execution uses it, so it is never removed under
 * one) and <key>.install (held while it is installed, so concurrent first
 * runs wait for one install). An install runs sandboxed into a temporary
 * directory that is renamed into place only when it succeeded: a failed or
 * interrupted install leaves nothing half-made behind. */
#include "envs/deps.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "images/roots.h"
#include "languages/runtime.h"
#include "runbox.h"

#include <ctype.h>
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

/* ---- requirements ----------------------------------------------------------------- */

static int compare_specs(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void rbx_requirements_free(rbx_requirements *reqs)
{
    for (size_t i = 0; i < reqs->count; i++)
        free(reqs->specs[i]);
    free(reqs->specs);
    reqs->specs = NULL;
    reqs->count = 0;
}

rbx_status rbx_requirements_parse(const rbx_engine *engine, const rbx_runtime *runtime,
                                  const rbx_request *request, rbx_requirements *reqs,
                                  rbx_error *err)
{
    memset(reqs, 0, sizeof *reqs);
    size_t count = request->requirement_count;
    if (count == 0)
        return RBX_OK;
    if (!runtime->install)
        return rbx_fail(err, RBX_EINVAL, "%s takes no requirements (python and javascript do)",
                        runtime->name);
    if (count > engine->config.max_requirements)
        return rbx_fail(err, RBX_EINVAL, "too many requirements: %zu (at most %u)", count,
                        engine->config.max_requirements);
    reqs->specs = calloc(count, sizeof *reqs->specs);
    if (!reqs->specs)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        const char *spec = request->requirements[i];
        char out[RBX_SPEC_MAX + 1], why[300];
        if (!spec || !*spec || strlen(spec) > RBX_SPEC_MAX) {
            rbx_requirements_free(reqs);
            return rbx_fail(err, RBX_EINVAL, "requirement %zu is empty or longer than %d bytes",
                            i + 1, RBX_SPEC_MAX);
        }
        if (!runtime->normalize_spec(spec, engine->config.allow_requirement_urls, out, sizeof out,
                                     why, sizeof why)) {
            rbx_requirements_free(reqs);
            return rbx_fail(err, RBX_EINVAL, "%s", why);
        }
        if (!(reqs->specs[reqs->count++] = strdup(out))) {
            rbx_requirements_free(reqs);
            return rbx_fail(err, RBX_ESYSTEM, "out of memory");
        }
    }
    qsort(reqs->specs, reqs->count, sizeof *reqs->specs, compare_specs);
    return RBX_OK;
}

/* ---- environments ---------------------------------------------------------------- */

/* The interpreter's identity stands for its version: an upgrade changes
 * the file, and with it every environment's key. */
static void runtime_identity(const rbx_runtime *runtime, const rbx_root *root, char *out,
                             size_t size)
{
    if (root->digest[0]) { /* an image's files never change under its digest */
        snprintf(out, size, "%s:%s", root->digest, runtime->interpreter);
        return;
    }
    char real[4096];
    struct stat st;
    if (!realpath(runtime->interpreter, real) || stat(real, &st) != 0) {
        snprintf(out, size, "%s", runtime->interpreter);
        return;
    }
    snprintf(out, size, "%s:%lld:%lld", real, (long long)st.st_size, (long long)st.st_mtim.tv_sec);
}

/* FNV-1a, 64 bits: names the directory; the full description is stored
 * beside it and compared, so a collision is detected, never used. */
static uint64_t fnv1a(const char *text, uint64_t hash)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        hash = (hash ^ *p) * 0x100000001b3ull;
    return (hash ^ 0xff) * 0x100000001b3ull;
}

static char *describe(const rbx_runtime *runtime, const rbx_root *root,
                      const rbx_requirements *reqs)
{
    char identity[4200];
    runtime_identity(runtime, root, identity, sizeof identity);
    json_t *specs = json_array();
    for (size_t i = 0; i < reqs->count; i++)
        json_array_append_new(specs, json_string(reqs->specs[i]));
    json_t *obj = json_pack("{s:s, s:s, s:o}", "runtime", runtime->name, "interpreter", identity,
                            "requirements", specs);
    char *text = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(obj);
    return text;
}

/* runbox's alone, like the whole state directory (engine.c): an
 * environment's name is a hash of what it holds, which anyone can work out. */
static int envs_dir(rbx_engine *engine)
{
    int state = open(engine->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = state >= 0 ? rbx_private_dir_at(state, "envs") : -1;
    int saved = errno;
    if (state >= 0)
        close(state);
    errno = saved;
    return fd;
}

static bool matches(int dirfd, const char *key, const char *description)
{
    char path[128];
    snprintf(path, sizeof path, "%s/" RBX_ENV_META, key);
    int fd = rbx_open_regular(dirfd, path, O_RDONLY);
    if (fd < 0)
        return false;
    json_t *meta = json_loadfd(fd, 0, NULL);
    close(fd);
    const char *stored = json_string_value(json_object_get(meta, "description"));
    bool same = stored && !strcmp(stored, description);
    json_decref(meta);
    return same;
}

static int lock_file(int dirfd, const char *key, const char *suffix, int how, double wait_s)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s", key, suffix);
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int64_t deadline = rbx_now_us() + (int64_t)(wait_s * 1e6);
    while (flock(fd, how | LOCK_NB) != 0) {
        if (rbx_now_us() >= deadline) {
            close(fd);
            errno = EWOULDBLOCK;
            return -1;
        }
        usleep(10000);
    }
    return fd;
}

void rbx_env_release(rbx_env *env)
{
    /* A plain close: kernels and prepared sandboxes hold duplicates of
     * this descriptor, and the shared lock is theirs as much as ours. */
    if (env->use_fd >= 0)
        close(env->use_fd);
    env->use_fd = -1;
    free(env->message);
    env->message = NULL;
}

rbx_status rbx_env_acquire(rbx_engine *engine, const rbx_runtime *runtime, rbx_root *root,
                           const rbx_requirements *reqs, rbx_env *env, rbx_error *err)
{
    memset(env, 0, sizeof *env);
    env->use_fd = -1;
    char *description = describe(runtime, root, reqs);
    int dirfd = envs_dir(engine);
    rbx_status status = RBX_OK;
    if (!description || dirfd < 0) {
        status = rbx_fail(err, RBX_ESYSTEM, "cannot prepare the environments directory: %s",
                          strerror(errno));
        goto out;
    }
    snprintf(env->key, sizeof env->key, "%s-%016llx", runtime->name,
             (unsigned long long)fnv1a(description, 0xcbf29ce484222325ull));
    snprintf(env->path, sizeof env->path, "%s/envs/%s", engine->state_dir, env->key);
    int64_t started = rbx_now_us();
    env->use_fd = lock_file(dirfd, env->key, ".use", LOCK_SH, 0);
    if (env->use_fd >= 0 && matches(dirfd, env->key, description)) {
        env->reused = true;
        (void)futimens(env->use_fd, NULL);
        goto out;
    }
    /* One install at a time per environment; whoever waited finds it made. */
    int install = lock_file(dirfd, env->key, ".install", LOCK_EX, engine->config.install_timeout_s);
    if (install < 0) {
        status =
            rbx_fail(err, RBX_ESYSTEM, "timed out waiting for another install of %s", env->key);
        goto out;
    }
    if (matches(dirfd, env->key, description)) {
        env->reused = true;
    } else {
        status = rbx_env_install(engine, runtime, root, reqs, dirfd, env, description, err);
        env->install_ms = (rbx_now_us() - started) / 1000;
    }
    rbx_lock_release(install);
    if (status == RBX_OK && env->use_fd >= 0)
        (void)futimens(env->use_fd, NULL);
out:
    if (status != RBX_OK)
        rbx_env_release(env);
    if (dirfd >= 0)
        close(dirfd);
    free(description);
    return status;
}
