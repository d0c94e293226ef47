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
