/* libarchive, loaded on first use. Only session moves (sessions/transfer*)
 * and image imports (images/unpack) read or write archives, and libarchive
 * brings a dozen libraries with it (compressors, libxml2, ICU's 30 MB), so
 * runbox does not link it: `runbox --version` and `runbox run` never load
 * it. A caller calls rbx_archive_load() before its first archive call, then
 * calls libarchive through the table, `rbx_ar->archive_read_new()`, whose
 * members have libarchive's names and types. */
#ifndef RBX_BASE_ARCHIVE_LIB_H
#define RBX_BASE_ARCHIVE_LIB_H

#include "runbox.h"

#include <archive.h>
#include <archive_entry.h>

/* The libarchive functions runbox calls, each one member of the table. */
#define RBX_ARCHIVE_FUNCTIONS(X) \
    X(archive_entry_filetype) \
    X(archive_entry_free) \
    X(archive_entry_gid) \
    X(archive_entry_hardlink) \
    X(archive_entry_hardlink_utf8) \
    X(archive_entry_linkify) \
    X(archive_entry_linkresolver_free) \
    X(archive_entry_linkresolver_new) \
    X(archive_entry_linkresolver_set_strategy) \
    X(archive_entry_mtime) \
    X(archive_entry_mtime_is_set) \
    X(archive_entry_mtime_nsec) \
    X(archive_entry_new) \
    X(archive_entry_pathname) \
    X(archive_entry_pathname_utf8) \
    X(archive_entry_perm) \
    X(archive_entry_set_dev) \
    X(archive_entry_set_ino64) \
    X(archive_entry_set_mode) \
    X(archive_entry_set_mtime) \
    X(archive_entry_set_nlink) \
    X(archive_entry_set_pathname) \
    X(archive_entry_set_size) \
    X(archive_entry_set_symlink) \
    X(archive_entry_size) \
    X(archive_entry_size_is_set) \
    X(archive_entry_sparse_add_entry) \
    X(archive_entry_sparse_clear) \
    X(archive_entry_sparse_count) \
    X(archive_entry_sparse_next) \
    X(archive_entry_sparse_reset) \
    X(archive_entry_symlink) \
    X(archive_entry_symlink_utf8) \
    X(archive_entry_uid) \
    X(archive_entry_xattr_add_entry) \
    X(archive_entry_xattr_next) \
    X(archive_entry_xattr_reset) \
    X(archive_error_string) \
    X(archive_read_data) \
    X(archive_read_data_block) \
    X(archive_read_free) \
    X(archive_read_new) \
    X(archive_read_next_header) \
    X(archive_read_open) \
    X(archive_read_open_fd) \
    X(archive_read_open_memory) \
    X(archive_read_support_filter_bzip2) \
    X(archive_read_support_filter_compress) \
    X(archive_read_support_filter_gzip) \
    X(archive_read_support_filter_lz4) \
    X(archive_read_support_filter_lzip) \
    X(archive_read_support_filter_lzma) \
    X(archive_read_support_filter_xz) \
    X(archive_read_support_filter_zstd) \
    X(archive_read_support_format_empty) \
    X(archive_read_support_format_tar) \
    X(archive_set_error) \
    X(archive_write_close) \
    X(archive_write_data) \
    X(archive_write_free) \
    X(archive_write_header) \
    X(archive_write_new) \
    X(archive_write_open_fd) \
    X(archive_write_set_format_option) \
    X(archive_write_set_format_pax_restricted)

struct rbx_archive_lib {
#define RBX_ARCHIVE_MEMBER(name) __typeof__(name) *name;
    RBX_ARCHIVE_FUNCTIONS(RBX_ARCHIVE_MEMBER)
#undef RBX_ARCHIVE_MEMBER
};

/* The shared object loaded: the soname runbox is built against. */
#define RBX_ARCHIVE_SONAME "libarchive.so.13"

/* Loads libarchive once per process (any thread; later calls only look).
 * RBX_OK, or RBX_ESYSTEM with a message naming the library, why it did not
 * load and the package to install. */
rbx_status rbx_archive_load(rbx_error *err);

/* The table, once rbx_archive_load has returned RBX_OK; NULL before. */
extern const struct rbx_archive_lib *rbx_ar;

#endif
