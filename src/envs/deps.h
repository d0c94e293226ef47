/* Dependencies: requirements, and the cached environments that hold them. */
#ifndef RBX_DEPS_H
#define RBX_DEPS_H

#include "images/roots.h"
#include "languages/runtime.h"
#include "runbox.h"

#define RBX_SPEC_MAX 200
#define RBX_ENV_META ".runbox-env.json"

/* An execution's requirements, validated, normalized and sorted. */
typedef struct rbx_requirements {
    char **specs;
    size_t count;
} rbx_requirements;

rbx_status rbx_requirements_parse(const rbx_engine *engine, const rbx_runtime *runtime,
                                  const rbx_request *request, rbx_requirements *reqs,
                                  rbx_error *err);
void rbx_requirements_free(rbx_requirements *reqs);

/* An environment in use by one execution. */
typedef struct rbx_env {
    char key[64];
    char path[4400];
    bool reused;
    int64_t install_ms;
    bool failed; /* the installer failed: message says why, the code must not run */
    char *message;
    int use_fd; /* held shared while the execution uses it */
} rbx_env;

/* Finds the environment for reqs, installing it first if needed (one
 * install however many executions want it at once). */
rbx_status rbx_env_acquire(rbx_engine *engine, const rbx_runtime *runtime, rbx_root *root,
                           const rbx_requirements *reqs, rbx_env *env, rbx_error *err);
void rbx_env_release(rbx_env *env);

/* install.c: runs the runtime's installer in a sandbox into a temporary
 * directory under dirfd (the envs directory) and renames it into place. */
rbx_status rbx_env_install(rbx_engine *engine, const rbx_runtime *runtime, rbx_root *root,
                           const rbx_requirements *reqs, int dirfd, rbx_env *env,
                           const char *description, rbx_error *err);

#endif
