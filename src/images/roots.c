/* The roots sandboxes run on, one per image an engine has been asked for.
 * Each has its plan, computed once, and as root its prepared mount
 * namespace (template.h), so an execution on an image costs what one on
 * the host's /usr costs: the image's tree is bound read-only, never
 * copied. The default root is made when the engine starts (its plan when
 * a sandbox first needs it); another is
 * made when a request first names its image, up to RBX_ROOTS_MAX, and kept
 * until the engine ends. */
#include "images/roots.h"
#include "base/error.h"
#include "engine/engine.h"
#include "images/images.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sandbox/mount.h"
#include "sandbox/plan_cache.h"
#include "sandbox/template.h"
#include "sandbox/template_pin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void root_free(rbx_root *root)
{
    if (!root)
        return;
    if (root->template) {
        rbx_template_free(root->template);
        free(root->template);
    }
    pthread_mutex_destroy(&root->template_lock);
    pthread_mutex_destroy(&root->plan_lock);
    free(root->plan);
    free(root);
}

/* A new root for the host (place NULL) or an image. */
static rbx_root *root_new(rbx_engine *engine, const rbx_image_place *place, rbx_error *err)
{
    rbx_root *root = calloc(1, sizeof *root);
    if (!root || !(root->plan = malloc(sizeof *root->plan))) {
        free(root);
        rbx_fail(err, RBX_ESYSTEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&root->template_lock, NULL);
    pthread_mutex_init(&root->plan_lock, NULL);
    if (rbx_runtime_count() > RBX_ROOT_RUNTIMES_MAX) { /* a language added: raise the max */
        rbx_fail(err, RBX_ESYSTEM, "more languages than RBX_ROOT_RUNTIMES_MAX");
        root_free(root);
        return NULL;
    }
    snprintf(root->image, sizeof root->image, "%s", place ? place->name : "host");
    if (place) {
        snprintf(root->digest, sizeof root->digest, "%s", place->digest);
        snprintf(root->tree, sizeof root->tree, "%s", place->tree);
    }
    root->home_size_mb = engine->config.disk_cap_bytes >> 20;
    /* What would make the plan fail, found now rather than at the first
     * execution: a tree whose path is too long for a plan, or no /usr. */
    char real[PATH_MAX], usr[PATH_MAX + 8];
    struct stat st;
    bool fits = !place || (realpath(root->tree, real) && strlen(real) < sizeof root->plan->tree);
    snprintf(usr, sizeof usr, "%s/usr", place && fits ? real : "");
    if (!fits || stat(usr, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rbx_fail(err, RBX_ESYSTEM, "%s%s has no /usr directory (or its path is too long)",
                 place ? "image " : "the host", place ? root->image : "");
        root_free(root);
        return NULL;
    }
    int tree = place ? open(root->tree, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    for (size_t i = 0; place && i < rbx_runtime_count(); i++)
        root->runtime_missing[i] =
            rbx_image_interpreter_missing(tree, rbx_runtime_find(rbx_runtime_name(i)));
    if (tree >= 0)
        close(tree);
    const char *use_template = getenv("RUNBOX_TEMPLATE");
    if (engine->is_root && !(use_template && !strcmp(use_template, "0"))) {
        root->template = calloc(1, sizeof *root->template);
        if (root->template) {
            root->template->ns_fd = -1;
            /* Too long a path: each process builds its own. The pin's name
             * hashes the plan, and with it the image's tree. */
            static const char sub[] = "/templates";
            size_t len = strlen(engine->state_dir);
            if (len + sizeof sub <= sizeof root->template->pin_dir) {
                memcpy(root->template->pin_dir, engine->state_dir, len);
                memcpy(root->template->pin_dir + len, sub, sizeof sub);
            }
        }
    }
    return root;
}

/* The plan as made here: where each system path is, and the mount points
 * of every runtime's environment. */
static void plan_make(rbx_root *root)
{
    rbx_root_plan_build(root->plan, NULL, 0, root->home_size_mb, root->tree[0] ? root->tree : NULL);
    for (size_t i = 0; i < rbx_runtime_count(); i++) {
        const rbx_runtime *runtime = rbx_runtime_find(rbx_runtime_name(i));
        if (runtime->env_run_at)
            rbx_root_plan_add_point(root->plan, runtime->env_run_at);
        if (runtime->env_inside)
            rbx_root_plan_add_point(root->plan, runtime->env_inside);
    }
}

const rbx_root_plan *rbx_root_plan_of(const rbx_root *root)
{
    /* Built once, then only read: the lock orders the first build before
     * every reader. (The root is shared and const to its users; its plan is
     * what it always was, found late.) As root, the one the last process
     * made from the same inputs is taken (plan_cache.h), where the
     * namespaces are pinned. */
    rbx_root *mutable = (rbx_root *)root;
    pthread_mutex_lock(&mutable->plan_lock);
    if (!mutable->plan_built) {
        const char *dir = root->template ? root->template->pin_dir : "";
        char name[RBX_PLAN_CACHE_NAME_MAX];
        time_t stamp = dir[0] ? rbx_template_host_stamp() : 0;
        if (dir[0])
            rbx_plan_cache_name(name, stamp, root->tree[0] ? root->tree : NULL,
                                root->home_size_mb);
        if (!dir[0] || !rbx_plan_cache_load(dir, name, mutable->plan)) {
            plan_make(mutable);
            if (dir[0])
                rbx_plan_cache_store(dir, name, mutable->plan);
        }
        mutable->plan_built = true;
    }
    pthread_mutex_unlock(&mutable->plan_lock);
    return mutable->plan;
}

static rbx_status make_root(rbx_engine *engine, const char *image, rbx_root **out, rbx_error *err)
{
    if (!strcmp(image, "host")) {
        *out = root_new(engine, NULL, err);
        return *out ? RBX_OK : err->status;
    }
    rbx_image_place place;
    rbx_status status = rbx_image_locate(engine, image, &place, err);
    if (status != RBX_OK)
        return status;
    *out = root_new(engine, &place, err);
    return *out ? RBX_OK : err->status;
}

rbx_status rbx_roots_init(rbx_engine *engine, rbx_error *err)
{
    pthread_mutex_init(&engine->roots_lock, NULL);
    const char *image = rbx_image_default_name(engine);
    rbx_root *root;
    rbx_status status = make_root(engine, image, &root, err);
    if (status != RBX_OK) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return rbx_fail(err, status, "the default image: %s", why);
    }
    engine->roots[0] = root;
    engine->root_count = 1;
    return RBX_OK;
}

void rbx_roots_free(rbx_engine *engine)
{
    for (size_t i = 0; i < engine->root_count; i++)
        root_free(engine->roots[i]);
    engine->root_count = 0;
    pthread_mutex_destroy(&engine->roots_lock);
}

/* Whether root still stands for what the store calls image: a name given
 * to another tree since (removed, imported again) means a new root. */
static bool current(rbx_engine *engine, const rbx_root *root)
{
    if (!root->digest[0])
        return true;
    rbx_image_place place;
    rbx_error ignored;
    return rbx_image_locate(engine, root->image, &place, &ignored) == RBX_OK &&
           !strcmp(place.digest, root->digest);
}

rbx_status rbx_engine_root(rbx_engine *engine, const char *image, rbx_root **out, rbx_error *err)
{
    if (!image || !*image) {
        *out = engine->roots[0];
        return RBX_OK;
    }
    char why[160];
    if (strcmp(image, "host") && !rbx_image_name_ok(image, why, sizeof why))
        return rbx_fail(err, RBX_EINVAL, "image: %s", why);
    if (!rbx_image_allowed(engine, image))
        return rbx_fail(err, RBX_EINVAL,
                        "image '%s' is not one this runbox lets requests name (allowed: %s)", image,
                        engine->config.images_allowed);
    pthread_mutex_lock(&engine->roots_lock);
    for (size_t i = 0; i < engine->root_count; i++) {
        rbx_root *root = engine->roots[i];
        if (!strcmp(root->image, image) && (i == 0 || current(engine, root))) {
            pthread_mutex_unlock(&engine->roots_lock);
            *out = root;
            return RBX_OK;
        }
    }
    rbx_root *root;
    rbx_status status = make_root(engine, image, &root, err);
    if (status == RBX_ENOENT) /* a request naming what is not there is a bad request */
        err->status = status = RBX_EINVAL;
    if (status == RBX_OK && engine->root_count == RBX_ROOTS_MAX) {
        /* Roots are never freed while the engine lives: executions and
         * kernels hold them without counting. */
        root_free(root);
        status = rbx_fail(err, RBX_EBUSY,
                          "this runbox has made roots for %d images (names given to new content "
                          "count again); restart it to use image '%s'",
                          RBX_ROOTS_MAX, image);
    } else if (status == RBX_OK) {
        engine->roots[engine->root_count++] = root;
        *out = root;
    }
    pthread_mutex_unlock(&engine->roots_lock);
    return status;
}

bool rbx_root_has_runtime(const rbx_root *root, const rbx_runtime *runtime, char *why,
                          size_t why_size)
{
    for (size_t i = 0; i < rbx_runtime_count(); i++) {
        const char *missing = root->runtime_missing[i];
        if (rbx_runtime_find(rbx_runtime_name(i)) != runtime || !missing)
            continue;
        snprintf(why, why_size, "image '%s' has no %s (%s): it cannot run %s", root->image,
                 runtime->interpreter, missing, runtime->name);
        return false;
    }
    return true;
}

int rbx_root_template_ns(rbx_root *root)
{
    if (!root->template)
        return -1;
    pthread_mutex_lock(&root->template_lock);
    int ns = rbx_template_ready(root->template, rbx_root_plan_of(root));
    /* A copy: a rebuild may close the root's while the caller clones. */
    int mine = ns >= 0 ? fcntl(ns, F_DUPFD_CLOEXEC, 3) : -1;
    pthread_mutex_unlock(&root->template_lock);
    return mine;
}

const char *rbx_root_template_why(rbx_root *root, bool is_root)
{
    if (!root->template)
        return is_root ? "turned off (RUNBOX_TEMPLATE=0)" : "needs root";
    pthread_mutex_lock(&root->template_lock);
    int ns = rbx_template_ready(root->template, rbx_root_plan_of(root));
    const char *why = ns >= 0 ? NULL : root->template->why;
    pthread_mutex_unlock(&root->template_lock);
    return why;
}

void rbx_roots_unpin(rbx_engine *engine)
{
    for (size_t i = 0; i < engine->root_count; i++)
        if (engine->roots[i]->template)
            rbx_template_unpin(engine->roots[i]->template->pin_dir, NULL);
}
