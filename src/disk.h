/* Session disks: each session's directory is its own filesystem of a fixed
 * size, so a program that fills it gets ENOSPC and the host's disk never
 * fills. As root: a sparse ext4 image per session, loop-mounted on the
 * session's work directory. Why not the alternatives: project quotas need
 * the host filesystem mounted with prjquota (most are not); a tmpfs would
 * keep every session's files in memory and lose them on reboot. Without
 * root nothing can be mounted on the host, so sessions are not capped (runbox
 * check and the result say so); one-off runs are capped everywhere by a
 * sized tmpfs inside the sandbox. */
#ifndef RBX_DISK_H
#define RBX_DISK_H

#include "internal.h"

/* Whether this process can give sessions their own capped filesystem. */
bool rbx_disk_supported(const rbx_engine *engine, char *why, size_t why_size);

/* Makes sure the session's work directory is its mounted disk, creating
 * the image on first use. Call with the session locked. */
rbx_status rbx_disk_attach(rbx_engine *engine, int session_dirfd, const char *work_path,
                           rbx_error *err);
/* Unmounts the session's disk, if mounted (the image stays). */
void rbx_disk_detach(const char *work_path);

#endif
