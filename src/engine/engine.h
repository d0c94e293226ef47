/* The engine's state: what engine.c makes when the engine starts, and
 * the subsystems read their part of (their directories, the
 * configuration). Its composition: engine.c. */
#ifndef RBX_ENGINE_ENGINE_H
#define RBX_ENGINE_ENGINE_H

#include "images/roots.h"
#include "runbox.h"

#include <pthread.h>

struct rbx_engine {
    rbx_config config;
    char state_dir[4096];
    char sessions_dir[4200];
    char trash_dir[4200];
    int sessions_fd;      /* sessions_dir (sessions/storage.h): every walk starts here */
    int session_trash_fd; /* its .trash/, for sessions on their way in or out */
    int scratch_fd;       /* its .scratch/, executions' scratch space */
    struct rbx_spares *scratch_spares; /* sessions/scratch_spares.h, or NULL */
    int trash_fd;         /* <state>/trash, for environments */
    enum { RBX_STORAGE_PLAIN, RBX_STORAGE_BTRFS } storage;
    bool storage_open; /* rbx_engine_open_storage has run (config.storage_later) */
    char storage_detail[400]; /* for runbox check */
    bool is_root;
    char images_dir[4200]; /* the image store (images/images.h) */
    /* Why executions that name no image run on the host's /usr although
     * the operator did not ask for it (the store has no "default"), for
     * each such result and runbox check; "" when they do not. */
    char image_note[4400];
    /* The roots sandboxes run on (roots.c): [0] the default image's, then
     * one per other image a request named, made when first named. */
    pthread_mutex_t roots_lock;
    size_t root_count;
    struct rbx_root *roots[RBX_ROOTS_MAX];
    struct rbx_policy *policy;        /* the operator's deny patterns, or NULL */
    struct rbx_egress_policy *egress; /* where the network may lead (egress/policy.h) */
    pthread_mutex_t running_lock;
    struct rbx_running *running; /* executions in progress, for cancellation */
    struct rbx_kernels *kernels; /* stateful sessions' kernels (kernels/kernels.h) */
    struct rbx_pool *pool;       /* prepared sandboxes (pool/pool.h), or NULL */
    struct rbx_processes *processes; /* processes (processes/processes.h) */
    /* What else holds a session's directory: its kernels, wired in here by
     * the engine so that sessions/ need not know kernels/. */
    struct rbx_session_holders {
        size_t (*stop)(rbx_engine *engine, const char *session_id, const char *language);
        void (*describe)(int session_dirfd, bool session_busy, rbx_session_info *info);
        int (*foreign_owner)(rbx_engine *engine, int session_dirfd);
        /* Its processes: killed when it is removed (not when its kernels
         * are restarted); then none may start until it is gone (false
         * when another runbox process has some there). */
        size_t (*stop_processes)(rbx_engine *engine, const char *session_id);
        bool (*keep_out_processes)(int session_dirfd, int *lock_fd);
    } session_holders;
};

#endif
