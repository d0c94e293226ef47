/* Hibernation (issue 34): a kernel that idles out is checkpointed into its
 * session's directory (<session>/hibernated-<language>/) and its processes
 * end; the session's next call of that language restores it, its
 * variables, imports, working directory and open files as they were.
 *
 * What a hibernated kernel leaves: criu's images (images/), the kernel's
 * scratch space (its /tmp, moved there so that nothing sweeps it), and
 * what the restore needs besides (checkpoint.json): the checkpoint's own
 * record, and what the kernel was started with, which the next call must
 * ask for again (image, requirements, network) on the same host kernel. Its lock file says "hibernated" with the images' size,
 * for `sessions list` in any runbox process.
 *
 * A kernel that cannot be checkpointed (see rbx_checkpoint_possible), or
 * whose checkpoint fails, is stopped as before: its next call says
 * kernel_restarted. So is one whose restore fails or does not match the
 * call: never a wrong state. */
#ifndef RBX_KERNELS_HIBERNATION_H
#define RBX_KERNELS_HIBERNATION_H

#include "kernels/call.h"
#include "kernels/kernels.h"
#include "runbox.h"
#include "sandbox/checkpoint.h"
#include "sessions/transfer.h"

#include <jansson.h>

/* Whether this engine hibernates kernels at all (root, not turned off,
 * and a criu that passes its check: probed once). */
bool rbx_hibernation_enabled(rbx_engine *engine);

/* The same without finding criu: false until something has asked the
 * above (the kernels' reaper does, once it starts). */
bool rbx_hibernation_known_enabled(rbx_engine *engine);

/* Checkpoints k (idle, out of the registry, its session's lock held by
 * the caller), whose sandbox ends; *bytes: the images' size. On failure
 * the kernel still runs and err says why. */
rbx_status rbx_kernel_hibernate(rbx_engine *engine, rbx_kernel *k, uint64_t *bytes,
                                rbx_error *err);

/* For a kernel about to start whose lock file said it hibernated: takes
 * back its scratch space and its checkpoint when both match what k is
 * started with (k->checkpoint is set then), else forgets the checkpoint and
 * says why in why (the call then reports kernel_restarted). */
void rbx_kernel_wake_prepare(rbx_engine *engine, rbx_kernel *k, char *why, size_t why_size);

/* A session's directory, where its checkpoints go (open, or -1). */
int rbx_checkpoint_session_open(rbx_engine *engine, const char *session_id);
/* A checkpoint's directory in a session (session an open directory):
 * <name>/images made anew, capped at the room the session's files and
 * other checkpoints ("hibernated-*") leave under its disk cap, *dir open
 * on <name>. ENOSPC where that room is too small. */
rbx_status rbx_checkpoint_dir_make(rbx_engine *engine, int session, const char *name, int *dir,
                                   rbx_error *err);
/* Once a checkpoint is written: the session's files are capped beside it. */
void rbx_checkpoint_dir_settle(rbx_engine *engine, int session);
/* Removes a checkpoint's directory, and gives its room back to the files. */
void rbx_checkpoint_dir_remove(rbx_engine *engine, const char *session_id, const char *name);

/* A checkpoint's record (RBX_CHECKPOINT_RECORD in its directory): what
 * criu's images hold of the tree beside its memory, as JSON and back
 * (false where it is not a kernel's, or a command's, as kernel says). */
json_t *rbx_checkpoint_to_json(const rbx_checkpoint *cp);
bool rbx_checkpoint_from_json(json_t *j, rbx_checkpoint *cp, bool kernel);
/* Writes the record into a checkpoint's directory (0600, a new file);
 * reads it back (NULL where it is missing, not runbox's, or too large). */
int rbx_checkpoint_record_write(int dir, json_t *record);
json_t *rbx_checkpoint_record_read(int dir);
/* The SHA-256 of a checkpoint's images (dir/images: each image's name and
 * bytes, in name order) in hex, and their size; -1 where they cannot be
 * read or exceed max bytes. */
int rbx_checkpoint_images_digest(int dir, uint64_t max, char hex[65], uint64_t *bytes);
/* The most bytes a tree's images may take: its memory's cap (0: none),
 * twice, and room for the rest (a checkpoint is its memory and a few
 * small files). */
uint64_t rbx_checkpoint_images_max(uint64_t memory_bytes);

/* The criu this engine checkpoints with ("" where none works). */
const char *rbx_kernel_criu(rbx_engine *engine);

/* The record's name in a checkpoint's directory, and its largest size. */
#define RBX_CHECKPOINT_RECORD "checkpoint.json"
#define RBX_CHECKPOINT_RECORD_MAX RBX_TRANSFER_PART_SMALL_MAX

/* Whether a file of a checkpoint's images/ is an image: not criu's logs
 * nor its pid file, which name the host's paths and pids and which a
 * restore makes anew (neither digested nor carried). */
bool rbx_checkpoint_image_named(const char *name);

/* A checkpoint carried in from another node (carry.c), its signature
 * checked: its record now names session_id, and the session's files are
 * capped beside it; *bytes its images' size. 0, or -1 with errno. */
int rbx_hibernation_rebind(rbx_engine *engine, int session_dir, const char *session_id,
                           const char *language, uint64_t *bytes);

/* Forgets a hibernated kernel's checkpoint (its session is being reset,
 * or it woke). */
void rbx_hibernation_forget(rbx_engine *engine, const char *session_id, const char *language);

#endif
