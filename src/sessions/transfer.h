#include "runbox.h"
/* What a session move carries: the one set of rules that export
 * (transfer.c) and import (transfer_import.c) both hold, so that whatever
 * export writes, import accepts, and what import would refuse, export
 * refuses first with the same reason.
 *
 * A session's names are bytes (newlines and non-UTF-8 ones too), each at
 * most NAME_MAX bytes, at any depth; its links are data, carried with
 * their targets as they are and never followed by the host; holes in its
 * files stay holes, and a file's other names are hard links to it. What
 * bounds a move is what bounds an import's cost: the number of members,
 * and the bytes of data, names and link targets together, which the
 * session's disk cap bounds. */
#pragma once

/* Directories, files and links in one move: an import makes an inode for
 * each, and is refused at the first member past this many, before any is
 * made. */
#define RBX_TRANSFER_MEMBERS_MAX 100000

/* The bytes of data, names and link targets one move may carry (holes
 * not counted): the session's disk cap, or no bound where there is none. */
uint64_t rbx_transfer_cap(const rbx_engine *engine);

/* The refusals both sides give, where `what` is "the session" (export)
 * or "the archive" (import). */
rbx_status rbx_transfer_too_many(rbx_error *err, const char *what);
rbx_status rbx_transfer_too_big(rbx_error *err, const char *what, uint64_t cap);
rbx_status rbx_transfer_file_too_big(rbx_error *err, const char *path, uint64_t size,
                                     uint64_t cap);

/* ---- parts: what the layers above carry besides the files ------------
 *
 * A move carries a session's files, and beside them a part for each
 * hibernated kernel (kernels/carry.c): its checkpoint's record, the
 * record's signature, its images and its /tmp, as members named
 *   .runbox/hibernated-<language>/checkpoint.json, signature, images/<name>, tmp/...
 * each marked with the attribute RBX_TRANSFER_PART_XATTR (value
 * RBX_TRANSFER_PART_CHECKPOINT). Export writes that mark on a part's
 * members only, so a file of the session named .runbox/... is a file. An
 * import places a part's members in <session>/hibernated-<language>/
 * (images/ a capped subvolume, tmp/ inside a scratch space as a kernel's
 * own), never among the files, and refuses any other shape; it trusts
 * none of it: the layer above checks the signature before the kernel may
 * wake from it. */
#define RBX_TRANSFER_PART_XATTR "runbox.part"
#define RBX_TRANSFER_PART_CHECKPOINT "checkpoint"
#define RBX_TRANSFER_PART_PREFIX ".runbox/hibernated-"
/* The largest record or signature a part holds (a checkpoint's record is
 * refused past it when a kernel wakes, too). */
#define RBX_TRANSFER_PART_SMALL_MAX (256 * 1024)

typedef struct rbx_transfer_out rbx_transfer_out;

/* Called by export after the session's files, the session held and its
 * directory (session_dir) open: adds the parts. */
typedef rbx_status (*rbx_transfer_more_fn)(void *user, int session_dir, rbx_transfer_out *out,
                                           rbx_error *err);

/* The session as a tar archive on out_fd: its files, then what more adds. */
rbx_status rbx_transfer_export(rbx_engine *engine, const char *id, int out_fd,
                               rbx_transfer_more_fn more, void *user, rbx_error *err);

/* Adds the tree below dir, its members named prefix<path>, marked as
 * part; and a member of len bytes at data. Within the move's bounds as
 * the files are. */
rbx_status rbx_transfer_add_tree(rbx_transfer_out *out, int dir, const char *prefix,
                                 const char *part);
rbx_status rbx_transfer_add_bytes(rbx_transfer_out *out, const char *path, const char *part,
                                  const void *data, size_t len);
/* ... and the regular file dir/name as the member path. */
rbx_status rbx_transfer_add_file(rbx_transfer_out *out, int dir, const char *name,
                                 const char *path, const char *part);

/* Called by import for each language whose checkpoint it placed (in
 * session_dir/hibernated-<language>/), the new session still held; a
 * failure here fails the import. */
typedef rbx_status (*rbx_transfer_carried_fn)(void *user, int session_dir, const char *session_id,
                                              const char *language, rbx_error *err);

/* A new session id from the archive (see rbx_session_import), handing
 * each checkpoint it carried to carried. */
rbx_status rbx_transfer_import(rbx_engine *engine, const char *id, const rbx_archive_source *from,
                               rbx_session_import_info *info, rbx_transfer_carried_fn carried,
                               void *user, rbx_error *err);
