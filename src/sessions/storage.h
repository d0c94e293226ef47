/* Session storage: where sessions' files and executions' scratch space
 * (/tmp, and a one-off run's home) live. As root, one btrfs filesystem in
 * an image for the whole state directory, mounted once on its sessions/
 * directory: each session's files are a subvolume capped by a quota
 * group, so nothing of a session is a mount or a loop device on the host,
 * and removing a session is one call whatever it holds. Elsewhere (an
 * ordinary user, no btrfs) plain directories, not capped. storage.c says
 * why btrfs. */
#ifndef RBX_STORAGE_H
#define RBX_STORAGE_H

#include "engine/engine.h"
#include "runbox.h"

/* Sets up the engine's storage (creating or mounting the image, and
 * migrating a state directory of the earlier layout, once): fills
 * engine->sessions_fd, session_trash_fd, scratch_fd and storage. */
rbx_status rbx_storage_open(rbx_engine *engine, rbx_error *err);
void rbx_storage_close(rbx_engine *engine);

/* Makes the session directory's work/ (owned by the sandbox's user,
 * capped at the configured size). Returns 0 or -1 with errno. */
int rbx_storage_make_work(rbx_engine *engine, int session_dirfd);
/* A session's checkpoints (hibernated kernels) share its disk cap with
 * its files. rbx_storage_make_capped makes name below dirfd a directory
 * that holds at most bytes (a subvolume with its own quota; a plain
 * directory, not capped, where the storage caps nothing), and
 * rbx_storage_cap_work caps the session's files at the disk cap less what
 * its checkpoints take (taken). Both 0 or -1 with errno. */
int rbx_storage_make_capped(rbx_engine *engine, int dirfd, const char *name, uint64_t bytes);
int rbx_storage_cap_work(rbx_engine *engine, int session_dirfd, uint64_t taken);
/* Whether the storage caps sizes at all (btrfs). */
bool rbx_storage_capped(const rbx_engine *engine);
/* Has what is written below dirfd's entry name compressed by the storage
 * where it can (btrfs: zstd, as the filesystem writes it back); elsewhere
 * nothing changes. 0, or -1 with errno. */
int rbx_storage_compress(rbx_engine *engine, int dirfd, const char *name);

/* Removes name below dirfd and everything in it, subvolumes included,
 * never following a link. Returns 0 or -1 with errno. */
int rbx_storage_remove(rbx_engine *engine, int dirfd, const char *name);
/* The bytes a session's files take (work/ below session_dirfd), counting
 * what was just written: it commits the storage first (rbx_storage_commit)
 * unless none of the session's files changed for long enough that the
 * last commits counted them. */
uint64_t rbx_storage_usage(rbx_engine *engine, int session_dirfd);
/* Commits the storage (btrfs counts a subvolume's bytes when its
 * transaction commits; cheap when nothing is pending), once for the many
 * rbx_storage_usage_committed that follow. */
void rbx_storage_commit(rbx_engine *engine);
/* rbx_storage_usage as of the last commit. */
uint64_t rbx_storage_usage_committed(rbx_engine *engine, int session_dirfd);

/* Refuses (RBX_ENOSPC) when the storage, or the host's disk under the
 * state directory, has too little room left for one more execution or
 * session to write what its quota allows. */
rbx_status rbx_storage_room(rbx_engine *engine, rbx_error *err);

/* One execution's scratch space: tmp/ for its /tmp and, for a one-off
 * run, home/ for its home, capped together; removed when it ends. Only
 * where the storage caps sizes (else *made is false and tmpfs serves). */
typedef struct rbx_scratch {
    bool made;
    char name[64];       /* below the scratch directory: random (its owner: storage.c) */
    char tmp_path[4400]; /* host paths, for the sandbox's binds */
    char home_path[4400];
} rbx_scratch;

rbx_status rbx_scratch_make(rbx_engine *engine, bool with_home, rbx_scratch *scratch,
                            rbx_error *err);
/* Destroys it, or keeps it as a spare (sessions/scratch_spares.h) for a
 * later rbx_scratch_make where spares are kept. Every process that had it
 * must be gone. */
void rbx_scratch_remove(rbx_engine *engine, rbx_scratch *scratch);

/* A kernel's scratch space out of the scratch directory to name below
 * dirfd (it hibernates: kernels/hibernation.h), and back under a new name
 * of this process (it wakes). Both 0 or -1 with errno; the scratch is
 * unchanged on failure. */
int rbx_scratch_stow(rbx_engine *engine, rbx_scratch *scratch, int dirfd, const char *name);
int rbx_scratch_unstow(rbx_engine *engine, int dirfd, const char *name, rbx_scratch *scratch);
/* An empty stowed scratch space at dirfd/name (an imported checkpoint's
 * /tmp goes in its tmp/): capped as a kernel's; -1 with errno, ENOTSUP
 * where this storage has no scratch spaces. */
int rbx_scratch_stowed_make(rbx_engine *engine, int dirfd, const char *name);

/* Removes what runbox processes that are gone left in the storage: half
 * made or half removed sessions, scratch space. */
void rbx_storage_sweep(rbx_engine *engine);

/* The earlier layout's sessions, while they move (storage.c puts them
 * there when it finds them where sessions/ now is). */
/* Unmounts the sessions' btrfs image (rbx_storage_unmount's part; the
 * roots' pins are the images'), waiting a few seconds for a runbox on its
 * way out. Plain storage: nothing to do. */
rbx_status rbx_sessions_unmount(rbx_engine *engine, rbx_error *err);

#define RBX_OLD_SESSIONS "sessions.v1"

/* migrate.c: moves the sessions of a state directory of the earlier layout
 * (one loop-mounted ext4 image per session, or plain directories) into the
 * storage, which rbx_storage_open made. Each session goes whole or not at
 * all, and a migration cut short resumes where it stopped; runbox
 * processes sharing the state directory take turns (its lock), so the
 * second finds nothing left to move. */
rbx_status rbx_migrate_old_sessions(rbx_engine *engine, rbx_error *err);

#endif
