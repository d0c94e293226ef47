/* Unit tests of image_unpack.c: root filesystems, OCI layouts and docker
 * save archives that the tests write with libarchive, the hostile ones
 * each refused with a message that says why, and never a byte written
 * outside the image's root: a canary directory beside the root must stay
 * as it was, and so must the host's own root. */
#include "unit_util.h"

#include "base/fsutil.h"
#include "images/unpack.h"
#include "kernels/wire.h"
#include "runbox.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <nettle/version.h>

#if NETTLE_VERSION_MAJOR >= 4
#define SHA256_FINISH(ctx, out) sha256_digest(ctx, out)
#else
#define SHA256_FINISH(ctx, out) sha256_digest(ctx, SHA256_DIGEST_SIZE, out)
#endif

#define GIB (1ull << 30)

typedef struct fixture {
    char base[64]; /* root/, canary/, tmp/ (TMPDIR) and the tests' archives */
    char path[128];
    int base_fd;
    int root_fd; /* the image's root */
    rbx_unpack_limits limits;
    rbx_error err;
    char host_probe[64]; /* a name the host's root must never get */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->base, sizeof f->base, "unpack");
    f->base_fd = open_dir_fd(f->base);
    assert_int_equal(mkdirat(f->base_fd, "root", 0755), 0);
    f->root_fd = openat(f->base_fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->root_fd >= 0);
    /* The canary beside the root, as unit_util.h's make_canary makes one. */
    assert_int_equal(mkdirat(f->base_fd, "canary", 0755), 0);
    assert_int_equal(fchmodat(f->base_fd, "canary", 0755, 0), 0);
    int canary = openat(f->base_fd, "canary", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    write_file_at(canary, "keep.txt", "canary\n", 7);
    assert_int_equal(mkdirat(canary, "sub", 0755), 0);
    int sub = openat(canary, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    write_file_at(sub, "inner.txt", "inner\n", 6);
    close(sub);
    close(canary);
    assert_int_equal(mkdirat(f->base_fd, "tmp", 0700), 0);
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s/tmp", f->base);
    setenv("TMPDIR", tmp, 1);
    f->limits = (rbx_unpack_limits){.max_bytes = 1 << 20, .max_entries = 1000};
    snprintf(f->host_probe, sizeof f->host_probe, "rbx-unpack-probe-%d", getpid());
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    close(f->root_fd);
    close(f->base_fd);
    remove_temp_tree(f->base);
    unsetenv("TMPDIR");
    free(f);
    return 0;
}

/* f->path: a file of the test's base directory. */
static const char *at_base(fixture *f, const char *name)
{
    snprintf(f->path, sizeof f->path, "%s/%s", f->base, name);
    return f->path;
}

static rbx_status unpack(fixture *f, const char *name)
{
    memset(&f->err, 0, sizeof f->err);
    char source[128];
    snprintf(source, sizeof source, "%s/%s", f->base, name);
    return rbx_image_unpack(f->root_fd, source, &f->limits, &f->err);
}

/* Nothing outside the root changed: the canary, the scratch directory
 * (TMPDIR) and the host's root. */
static void assert_nothing_outside(fixture *f)
{
    char canary[128];
    snprintf(canary, sizeof canary, "%s/canary", f->base);
    assert_canary_intact(canary);
    assert_int_equal(count_entries_at(f->base_fd, "tmp"), 0);
    char probe[128];
    snprintf(probe, sizeof probe, "/%s", f->host_probe);
    assert_false(exists_at(AT_FDCWD, probe));
}

static void assert_refused(fixture *f, const char *name, rbx_status status, const char *says)
{
    rbx_status got = unpack(f, name);
    if (got != status || !strstr(f->err.message, says))
        fail_msg("unpacking %s gave status %d (\"%s\"), expected %d with \"%s\"", name, got,
                 f->err.message, status, says);
    assert_nothing_outside(f);
}

static void assert_unpacks(fixture *f, const char *name)
{
    if (unpack(f, name) != RBX_OK)
        fail_msg("unpacking %s: %s", name, f->err.message);
    assert_nothing_outside(f);
}

/* ---- writing archives -------------------------------------------------- */

static struct archive *tar_begin(fixture *f, const char *name, const char *filter)
{
    struct archive *a = archive_write_new();
    assert_non_null(a);
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    if (filter && !strcmp(filter, "gzip"))
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    if (filter && !strcmp(filter, "zstd"))
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, at_base(f, name)), ARCHIVE_OK);
    return a;
}

static void tar_end(struct archive *a)
{
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static struct archive_entry *entry_new(const char *path, mode_t mode)
{
    struct archive_entry *e = archive_entry_new();
    assert_non_null(e);
    archive_entry_set_pathname(e, path);
    archive_entry_set_mode(e, mode);
    archive_entry_set_mtime(e, 1700000000, 0);
    return e;
}

static void tar_write(struct archive *a, struct archive_entry *e, const char *data, size_t len)
{
    if (archive_write_header(a, e) != ARCHIVE_OK)
        fail_msg("writing %s: %s", archive_entry_pathname(e), archive_error_string(a));
    if (len)
        assert_int_equal(archive_write_data(a, data, len), (la_ssize_t)len);
    archive_entry_free(e);
}

static void tar_dir(struct archive *a, const char *path, mode_t perm)
{
    tar_write(a, entry_new(path, AE_IFDIR | perm), NULL, 0);
}

static void tar_file(struct archive *a, const char *path, mode_t perm, const char *data)
{
    struct archive_entry *e = entry_new(path, AE_IFREG | perm);
    archive_entry_set_size(e, (la_int64_t)strlen(data));
    tar_write(a, e, data, strlen(data));
}

static void tar_symlink(struct archive *a, const char *path, const char *target)
{
    struct archive_entry *e = entry_new(path, AE_IFLNK | 0777);
    archive_entry_set_symlink(e, target);
    tar_write(a, e, NULL, 0);
}

static void tar_hardlink(struct archive *a, const char *path, const char *target)
{
    struct archive_entry *e = entry_new(path, AE_IFREG | 0644);
    archive_entry_set_hardlink(e, target);
    tar_write(a, e, NULL, 0);
}

static void tar_node(struct archive *a, const char *path, mode_t type)
{
    struct archive_entry *e = entry_new(path, type | 0600);
    archive_entry_set_rdevmajor(e, 8);
    tar_write(a, e, NULL, 0);
}

/* An archive of one member each, for the hostile cases. */
static void tar_one_file(fixture *f, const char *name, const char *path, mode_t perm)
{
    struct archive *a = tar_begin(f, name, NULL);
    tar_file(a, path, perm, "data\n");
    tar_end(a);
}

/* ---- a plain root filesystem ------------------------------------------- */

static void rootfs_tar_unpacks_files_dirs_modes_and_links(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "rootfs.tar.gz", "gzip");
    tar_dir(a, "./", 0755);
    tar_dir(a, "./etc/", 0755);
    tar_file(a, "./etc/marker", 0644, "marker\n");
    tar_file(a, "./etc/shadow", 0640, "secret\n");
    tar_dir(a, "./tmp/", 01777);
    tar_dir(a, "./var/mail/", 02775);
    tar_file(a, "/usr/bin/python3.13", 0755, "#!python\n"); /* absolute: from the root */
    tar_symlink(a, "./usr/bin/python3", "python3.13");
    tar_symlink(a, "./usr/bin/python", "/usr/bin/python3.13");
    tar_dir(a, "./usr/lib64/", 0755);
    tar_symlink(a, "./lib64", "usr/lib64");
    tar_hardlink(a, "./usr/bin/python-hard", "./usr/bin/python3.13");
    tar_file(a, "./usr/bin/sticky", 01755, "x");
    tar_end(a);

    assert_unpacks(f, "rootfs.tar.gz");
    int root = f->root_fd;
    assert_file_content_at(root, "etc/marker", "marker\n");
    assert_file_content_at(root, "usr/bin/python3.13", "#!python\n");
    struct stat st, hard;
    assert_int_equal(fstatat(root, "etc/shadow", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(fstatat(root, "tmp", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 01777);
    assert_int_equal(fstatat(root, "var/mail", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 02775); /* set-gid on a directory is kept */
    assert_int_equal(fstatat(root, "usr/bin/sticky", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 0755); /* no sticky bit on files */
    assert_int_equal(st.st_mtime, 1700000000);
    char target[64];
    ssize_t n = readlinkat(root, "usr/bin/python3", target, sizeof target - 1);
    assert_true(n > 0);
    target[n] = 0;
    assert_string_equal(target, "python3.13");
    n = readlinkat(root, "usr/bin/python", target, sizeof target - 1);
    assert_true(n > 0);
    target[n] = 0;
    assert_string_equal(target, "/usr/bin/python3.13");
    n = readlinkat(root, "lib64", target, sizeof target - 1);
    assert_true(n > 0);
    target[n] = 0;
    assert_string_equal(target, "usr/lib64");
    assert_int_equal(fstatat(root, "usr/bin/python3.13", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(fstatat(root, "usr/bin/python-hard", &hard, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_ino, hard.st_ino);
    assert_int_equal(st.st_nlink, 2);
}

static void rootfs_tar_keeps_owners_as_root(void **state)
{
    fixture *f = *state;
    if (geteuid() != 0)
        skip();
    struct archive *a = tar_begin(f, "owners.tar", NULL);
    struct archive_entry *e = entry_new("owned", AE_IFREG | 0644);
    archive_entry_set_uid(e, 1234);
    archive_entry_set_gid(e, 5678);
    archive_entry_set_size(e, 1);
    tar_write(a, e, "x", 1);
    e = entry_new("owned-link", AE_IFLNK | 0777);
    archive_entry_set_symlink(e, "owned");
    archive_entry_set_uid(e, 4321);
    archive_entry_set_gid(e, 8765);
    tar_write(a, e, NULL, 0);
    tar_end(a);
    assert_unpacks(f, "owners.tar");
    struct stat st;
    assert_int_equal(fstatat(f->root_fd, "owned", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_uid, 1234);
    assert_int_equal(st.st_gid, 5678);
    assert_int_equal(fstatat(f->root_fd, "owned-link", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_uid, 4321);
    assert_int_equal(st.st_gid, 8765);
}

/* ---- hostile root filesystems ----------------------------------------- */

static void link_to_the_canary_is_refused_as_climbing_out(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "t.tar", NULL);
    tar_symlink(a, "link", "../canary");
    tar_file(a, "link/keep.txt", 0644, "overwritten\n");
    tar_end(a);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "image archive member \"link\" is a link to \"../canary\", which climbs out "
                   "of the image");
    assert_false(exists_at(f->root_fd, "link"));
}

static void deeper_link_climbing_out_is_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "t.tar", NULL);
    tar_dir(a, "a", 0755);
    tar_symlink(a, "a/b", "../../../etc");
    tar_end(a);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "member \"a/b\" is a link to \"../../../etc\", which climbs out");
}

static void member_through_a_link_to_the_hosts_root_is_refused(void **state)
{
    fixture *f = *state;
    char member[128];
    snprintf(member, sizeof member, "link/%s", f->host_probe);
    struct archive *a = tar_begin(f, "t.tar", NULL);
    tar_symlink(a, "link", "/"); /* fine: the image's own root, in a sandbox */
    tar_file(a, member, 0644, "escaped\n");
    tar_end(a);
    assert_refused(f, "t.tar", RBX_EINVAL, "goes through the link \"link\" (-> /)");
    struct stat st;
    assert_int_equal(fstatat(f->root_fd, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void member_through_a_link_deeper_down_is_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "t.tar", NULL);
    tar_dir(a, "usr", 0755);
    tar_dir(a, "usr/lib", 0755);
    tar_symlink(a, "lib", "usr/lib"); /* inside, and yet not written through */
    tar_file(a, "lib/x/libc.so", 0644, "x");
    tar_end(a);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "image archive member \"lib/x/libc.so\" goes through the link \"lib\" (-> "
                   "usr/lib) an earlier member made");
    assert_int_equal(count_entries_at(f->root_fd, "usr/lib"), 0);
}

static void dot_dot_member_is_refused(void **state)
{
    fixture *f = *state;
    tar_one_file(f, "t.tar", "../canary/x", 0644);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "image archive member \"../canary/x\" has a path with a \"..\" component");
    tar_one_file(f, "u.tar", "a/../../x", 0644);
    assert_refused(f, "u.tar", RBX_EINVAL, "has a path with a \"..\" component");
}

static void hard_link_out_of_the_image_is_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "t.tar", NULL);
    tar_hardlink(a, "h", "../canary/keep.txt");
    tar_end(a);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "image archive member \"h\" has a hard link target with a \"..\" component");
    assert_false(exists_at(f->root_fd, "h"));
}

static void hard_link_to_what_is_not_an_unpacked_file_is_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "t.tar", NULL);
    tar_dir(a, "d", 0755);
    tar_hardlink(a, "h", "/d");
    tar_end(a);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "member \"h\" is a hard link to \"d\", which is not a regular file unpacked "
                   "before it");
    a = tar_begin(f, "u.tar", NULL);
    tar_hardlink(a, "h2", "/etc/passwd"); /* the host has it; the image does not */
    tar_end(a);
    assert_refused(f, "u.tar", RBX_EINVAL, "is a hard link to \"etc/passwd\", which is not");
}

static void devices_fifos_are_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "chr.tar", NULL);
    tar_dir(a, "dev", 0755);
    tar_node(a, "dev/null", AE_IFCHR);
    tar_end(a);
    assert_refused(f, "chr.tar", RBX_EINVAL,
                   "image archive member \"dev/null\" is a character device: images may hold "
                   "directories, regular files and links only");
    a = tar_begin(f, "blk.tar", NULL);
    tar_node(a, "dev/sda", AE_IFBLK);
    tar_end(a);
    assert_refused(f, "blk.tar", RBX_EINVAL,
                   "image archive member \"dev/sda\" is a block device: images may hold "
                   "directories, regular files and links only");
    a = tar_begin(f, "fifo.tar", NULL);
    tar_node(a, "run/fifo", AE_IFIFO);
    tar_end(a);
    assert_refused(f, "fifo.tar", RBX_EINVAL, "image archive member \"run/fifo\" is a FIFO");
    assert_false(exists_at(f->root_fd, "dev/sda"));
    assert_false(exists_at(f->root_fd, "run"));
}

static void set_uid_file_is_refused_unless_dropped(void **state)
{
    fixture *f = *state;
    tar_one_file(f, "t.tar", "usr/bin/su", 04755);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "image archive member \"usr/bin/su\" is set-uid (mode 4755): images may not "
                   "hold set-id programs; --drop-setid imports it with the bit cleared");
    assert_false(exists_at(f->root_fd, "usr/bin/su"));
    tar_one_file(f, "g.tar", "usr/bin/chage", 02755);
    assert_refused(f, "g.tar", RBX_EINVAL, "is set-gid (mode 2755)");

    f->limits.drop_setid = true;
    assert_unpacks(f, "t.tar");
    assert_unpacks(f, "g.tar");
    struct stat st;
    assert_int_equal(fstatat(f->root_fd, "usr/bin/su", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(fstatat(f->root_fd, "usr/bin/chage", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
}

/* The bytes that reach the client's write callback: the header, then
 * nothing, so that libarchive's padding of 10 GiB is never written. */
typedef struct cut_writer {
    int fd;
    bool cut;
} cut_writer;

static la_ssize_t cut_write(struct archive *a, void *user, const void *data, size_t len)
{
    cut_writer *w = user;
    if (w->cut) {
        archive_set_error(a, EIO, "cut here");
        return -1;
    }
    return write(w->fd, data, len);
}

static void member_declaring_10_gib_is_refused_before_a_byte(void **state)
{
    fixture *f = *state;
    cut_writer w = {.fd = open(at_base(f, "big.tar"), O_WRONLY | O_CREAT | O_TRUNC, 0644)};
    assert_true(w.fd >= 0);
    struct archive *a = archive_write_new();
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_set_bytes_per_block(a, 0), ARCHIVE_OK);
    assert_int_equal(archive_write_open(a, &w, NULL, cut_write, NULL), ARCHIVE_OK);
    tar_file(a, "small", 0644, "small\n");
    struct archive_entry *e = entry_new("big", AE_IFREG | 0644);
    archive_entry_set_size(e, 10 * GIB);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    archive_entry_free(e);
    w.cut = true;
    archive_write_free(a); /* fails to pad the member: the archive ends after its header */
    close(w.fd);

    f->limits.max_bytes = 1 * GIB;
    assert_refused(f, "big.tar", RBX_ENOSPC,
                   "image archive member \"big\" declares 10737418240 bytes, more than the "
                   "1073741818 left of the image's limit of 1073741824 bytes");
    assert_false(exists_at(f->root_fd, "big"));
    assert_file_content_at(f->root_fd, "small", "small\n");
}

static void sparse_member_is_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "sparse.tar", NULL);
    struct archive_entry *e = entry_new("sparse", AE_IFREG | 0644);
    archive_entry_set_size(e, 10 * GIB);
    archive_entry_sparse_add_entry(e, 0, 4096);
    if (archive_write_header(a, e) != ARCHIVE_OK)
        fail_msg("writing a sparse member: %s", archive_error_string(a));
    char block[4096] = {'x'};
    assert_int_equal(archive_write_data(a, block, sizeof block), (la_ssize_t)sizeof block);
    archive_entry_free(e);
    tar_end(a);
    f->limits.max_bytes = 20 * GIB; /* the size would fit: being sparse is what is refused */
    assert_refused(f, "sparse.tar", RBX_EINVAL,
                   "image archive member \"sparse\" is a sparse file: images may hold plain "
                   "regular files only");
    assert_false(exists_at(f->root_fd, "sparse"));
}

static void more_bytes_than_the_limit_are_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "t.tar", NULL);
    tar_file(a, "one", 0644, "0123456789");
    tar_file(a, "two", 0644, "0123456789");
    tar_end(a);
    f->limits.max_bytes = 15;
    assert_refused(f, "t.tar", RBX_ENOSPC,
                   "image archive member \"two\" declares 10 bytes, more than the 5 left of the "
                   "image's limit of 15 bytes");
    assert_false(exists_at(f->root_fd, "two"));
}

static void more_members_than_the_limit_are_refused(void **state)
{
    fixture *f = *state;
    struct archive *a = tar_begin(f, "t.tar", NULL);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        tar_file(a, name, 0644, "x");
    }
    tar_end(a);
    f->limits.max_entries = 3;
    assert_refused(f, "t.tar", RBX_ENOSPC,
                   "the image archive has more members than the image's limit of 3 (every "
                   "layer counted), at member \"f3\"");
    assert_false(exists_at(f->root_fd, "f3"));
    f->limits.max_entries = 5;
    rbx_remove_tree(f->base_fd, "root");
    assert_int_equal(mkdirat(f->base_fd, "root", 0755), 0);
    close(f->root_fd);
    f->root_fd = openat(f->base_fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_unpacks(f, "t.tar");
}

static void whiteout_in_a_root_filesystem_is_refused(void **state)
{
    fixture *f = *state;
    tar_one_file(f, "t.tar", "etc/.wh.passwd", 0644);
    assert_refused(f, "t.tar", RBX_EINVAL,
                   "image archive member \"etc/.wh.passwd\" is a whiteout (named .wh.*): "
                   "whiteouts belong in image layers");
}

static void missing_source_and_other_files_are_refused(void **state)
{
    fixture *f = *state;
    assert_refused(f, "nothing-here.tar", RBX_ENOENT, "nothing-here.tar");
    write_file_at(f->base_fd, "junk.tar", "this is not a tar archive at all\n", 33);
    assert_refused(f, "junk.tar", RBX_EINVAL, "the image archive is not a readable tar archive");
    write_file_at(f->base_fd, "empty.tar", "", 0);
    assert_refused(f, "empty.tar", RBX_EINVAL, "empty.tar holds no member");
    assert_int_equal(mkdirat(f->base_fd, "plain-dir", 0755), 0);
    assert_refused(f, "plain-dir", RBX_EINVAL, "is a directory but not an image layout");
}

/* ---- OCI image layouts ------------------------------------------------- */

static void sha256_of(const void *data, size_t len, char out[72])
{
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    uint8_t digest[SHA256_DIGEST_SIZE];
    SHA256_FINISH(&ctx, digest);
    strcpy(out, "sha256:");
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", digest[i]);
}

static char *read_whole(const char *path, size_t *len)
{
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    assert_int_equal(fseek(file, 0, SEEK_END), 0);
    long size = ftell(file);
    rewind(file);
    char *data = malloc((size_t)size + 1);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, (size_t)size, file), (size_t)size);
    fclose(file);
    *len = (size_t)size;
    return data;
}

/* Stores data as a blob of the layout dir; its digest in digest. */
static size_t put_blob(fixture *f, const char *layout, const void *data, size_t len,
                       char digest[72])
{
    sha256_of(data, len, digest);
    char path[256];
    snprintf(path, sizeof path, "%s/%s/blobs/sha256/%s", f->base, layout, digest + 7);
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(data, 1, len, file), len);
    fclose(file);
    return len;
}

/* The archive name (in base) as a blob: it goes. */
static size_t put_blob_from(fixture *f, const char *layout, const char *name, char digest[72])
{
    size_t len;
    char *data = read_whole(at_base(f, name), &len);
    put_blob(f, layout, data, len, digest);
    free(data);
    unlinkat(f->base_fd, name, 0);
    return len;
}

/* Layer 1: etc/marker "one", etc/gone, d/{a,sub/b}, keep/k; layer 2:
 * etc/marker "two", etc/.wh.gone, d/.wh..wh..opq, d/new, and made and
 * whited out in the same layer, same/f (which stays). */
static void write_two_layers(fixture *f)
{
    struct archive *a = tar_begin(f, "layer1", "gzip");
    tar_dir(a, "etc/", 0755);
    tar_file(a, "etc/marker", 0644, "one\n");
    tar_file(a, "etc/gone", 0644, "gone\n");
    tar_dir(a, "d/", 0755);
    tar_file(a, "d/a", 0644, "a\n");
    tar_dir(a, "d/sub/", 0755);
    tar_file(a, "d/sub/b", 0644, "b\n");
    tar_dir(a, "keep/", 0755);
    tar_file(a, "keep/k", 0644, "k\n");
    tar_symlink(a, "lib64", "/usr/lib64");
    tar_end(a);
    a = tar_begin(f, "layer2", "zstd");
    tar_file(a, "etc/marker", 0644, "two\n");
    tar_file(a, "etc/.wh.gone", 0644, "");
    tar_file(a, "d/.wh..wh..opq", 0644, "");
    tar_file(a, "d/new", 0644, "new\n");
    tar_dir(a, "same/", 0755);
    tar_file(a, "same/f", 0644, "this layer's\n");
    tar_file(a, "same/.wh.f", 0644, ""); /* hides lower layers' f only */
    tar_end(a);
}

typedef struct layout_spec {
    const char *manifest_digest; /* as the index names it (NULL: the true one) */
    bool corrupt_layer;          /* a layer's blob altered after its digest was taken */
    bool two_platforms;          /* the index lists an arm64 manifest too */
} layout_spec;

/* An OCI image layout directory `name` in base, of the two layers. */
static void write_layout(fixture *f, const char *name, layout_spec spec)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s/blobs/sha256", f->base, name);
    assert_int_equal(rbx_mkdir_p(dir, 0755), 0);
    write_two_layers(f);
    char layer1[72], layer2[72], config[72], manifest[72], other[72];
    size_t size1 = put_blob_from(f, name, "layer1", layer1);
    size_t size2 = put_blob_from(f, name, "layer2", layer2);
    const char *config_text = "{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":"
                              "{\"type\":\"layers\",\"diff_ids\":[]}}";
    size_t config_size = put_blob(f, name, config_text, strlen(config_text), config);
    json_t *manifest_json =
        json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}, {s:s, s:s, s:I}]}",
                  "schemaVersion", 2, "mediaType", "application/vnd.oci.image.manifest.v1+json",
                  "config", "mediaType", "application/vnd.oci.image.config.v1+json", "digest",
                  config, "size", (json_int_t)config_size, "layers", "mediaType",
                  "application/vnd.oci.image.layer.v1.tar+gzip", "digest", layer1, "size",
                  (json_int_t)size1, "mediaType", "application/vnd.oci.image.layer.v1.tar+zstd",
                  "digest", layer2, "size", (json_int_t)size2);
    char *manifest_text = json_dumps(manifest_json, JSON_COMPACT);
    json_decref(manifest_json);
    size_t manifest_size = put_blob(f, name, manifest_text, strlen(manifest_text), manifest);
    free(manifest_text);
    const char *other_text = "{\"schemaVersion\":2,\"layers\":[]}";
    size_t other_size = put_blob(f, name, other_text, strlen(other_text), other);
    json_t *index =
        json_pack("{s:i, s:[{s:s, s:s, s:I, s:{s:s, s:s}}]}", "schemaVersion", 2, "manifests",
                  "mediaType", "application/vnd.oci.image.manifest.v1+json", "digest",
                  spec.manifest_digest ? spec.manifest_digest : manifest, "size",
                  (json_int_t)manifest_size, "platform", "architecture", "amd64", "os", "linux");
    if (spec.two_platforms)
        json_array_append_new(json_object_get(index, "manifests"),
                              json_pack("{s:s, s:s, s:I, s:{s:s, s:s}}", "mediaType",
                                        "application/vnd.oci.image.manifest.v1+json", "digest",
                                        other, "size", (json_int_t)other_size, "platform",
                                        "architecture", "arm64", "os", "linux"));
    snprintf(dir, sizeof dir, "%s/%s/index.json", f->base, name);
    assert_int_equal(json_dump_file(index, dir, 0), 0);
    json_decref(index);
    snprintf(dir, sizeof dir, "%s/%s/oci-layout", f->base, name);
    FILE *marker = fopen(dir, "w");
    fputs("{\"imageLayoutVersion\":\"1.0.0\"}", marker);
    fclose(marker);
    if (spec.corrupt_layer) {
        snprintf(dir, sizeof dir, "%s/%s/blobs/sha256/%s", f->base, name, layer2 + 7);
        int fd = open(dir, O_WRONLY);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, "X", 1, 20), 1);
        close(fd);
    }
}

/* The layout directory `layout` as a tar archive `name` (oci-archive). */
static void pack_layout(fixture *f, const char *layout, const char *name)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", f->base, layout);
    struct archive *a = tar_begin(f, name, NULL);
    tar_dir(a, "blobs/", 0755);
    tar_dir(a, "blobs/sha256/", 0755);
    const char *tops[] = {"oci-layout", "index.json"};
    for (size_t i = 0; i < 2; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%s", dir, tops[i]);
        size_t len;
        char *data = read_whole(path, &len);
        struct archive_entry *e = entry_new(tops[i], AE_IFREG | 0644);
        archive_entry_set_size(e, (la_int64_t)len);
        tar_write(a, e, data, len);
        free(data);
    }
    snprintf(dir, sizeof dir, "%s/%s/blobs/sha256", f->base, layout);
    DIR *blobs = opendir(dir);
    assert_non_null(blobs);
    struct dirent *d;
    while ((d = readdir(blobs))) {
        if (d->d_name[0] == '.')
            continue;
        char path[700], member[300];
        snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
        snprintf(member, sizeof member, "blobs/sha256/%s", d->d_name);
        size_t len;
        char *data = read_whole(path, &len);
        struct archive_entry *e = entry_new(member, AE_IFREG | 0644);
        archive_entry_set_size(e, (la_int64_t)len);
        tar_write(a, e, data, len);
        free(data);
    }
    closedir(blobs);
    tar_end(a);
}

static void assert_two_layers_applied(fixture *f)
{
    int root = f->root_fd;
    assert_file_content_at(root, "etc/marker", "two\n");
    assert_false(exists_at(root, "etc/gone"));
    assert_false(exists_at(root, "etc/.wh.gone"));
    assert_int_equal(count_entries_at(root, "etc"), 1);
    assert_int_equal(count_entries_at(root, "d"), 1); /* opaque: only this layer's */
    assert_file_content_at(root, "d/new", "new\n");
    assert_file_content_at(root, "keep/k", "k\n");
    assert_file_content_at(root, "same/f", "this layer's\n");
    assert_int_equal(count_entries_at(root, "same"), 1);
    struct stat st;
    assert_int_equal(fstatat(root, "lib64", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void oci_layout_applies_layers_with_whiteouts(void **state)
{
    fixture *f = *state;
    write_layout(f, "layout", (layout_spec){0});
    assert_unpacks(f, "layout");
    assert_two_layers_applied(f);
}

static void oci_archive_applies_layers_and_leaves_no_scratch(void **state)
{
    fixture *f = *state;
    write_layout(f, "layout", (layout_spec){0});
    pack_layout(f, "layout", "layout.tar");
    assert_unpacks(f, "layout.tar"); /* and TMPDIR is empty again */
    assert_two_layers_applied(f);
}

static void oci_archive_blobs_count_towards_the_byte_limit(void **state)
{
    fixture *f = *state;
    write_layout(f, "layout", (layout_spec){0});
    pack_layout(f, "layout", "layout.tar");
    f->limits.max_bytes = 100; /* the layers' files fit; the blobs do not */
    assert_refused(f, "layout.tar", RBX_ENOSPC, "left of the image's limit of 100 bytes");
}

static void layout_whose_layer_does_not_match_its_digest_is_refused(void **state)
{
    fixture *f = *state;
    write_layout(f, "layout", (layout_spec){.corrupt_layer = true});
    assert_refused(f, "layout", RBX_EINVAL, "the image layout's layer 2 of 2 (blobs/sha256/");
    assert_true(strstr(f->err.message, "does not match its digest: its sha256 is"));
    assert_false(exists_at(f->root_fd, "d/new")); /* refused before a member of it */
    pack_layout(f, "layout", "layout.tar");
    assert_refused(f, "layout.tar", RBX_EINVAL, "does not match its digest");
}

static void layout_digest_naming_a_path_is_refused(void **state)
{
    fixture *f = *state;
    write_layout(f, "layout", (layout_spec){.manifest_digest = "sha256:../../x"});
    assert_refused(f, "layout", RBX_EINVAL,
                   "the image layout's index entry has no valid digest (\"sha256:../../x\"): a "
                   "digest is \"sha256:\" and 64 lowercase hex digits");
    assert_int_equal(count_entries_at(f->base_fd, "root"), 0);
}

static void layout_picks_this_platforms_manifest(void **state)
{
    fixture *f = *state;
#ifndef __x86_64__
    skip(); /* the layout's manifests are for amd64 and arm64 */
#endif
    write_layout(f, "layout", (layout_spec){.two_platforms = true});
    assert_unpacks(f, "layout");
    assert_two_layers_applied(f);
}

/* ---- docker save archives of older Docker ----------------------------- */

static void docker_save_archive_applies_its_layers(void **state)
{
    fixture *f = *state;
    write_two_layers(f);
    char diff1[72], diff2[72], config[72];
    size_t len1, len2;
    char *layer1 = read_whole(at_base(f, "layer1"), &len1);
    char *layer2 = read_whole(at_base(f, "layer2"), &len2);
    /* Docker stores its layers uncompressed: libarchive reads either. */
    sha256_of(layer1, len1, diff1);
    sha256_of(layer2, len2, diff2);
    char *config_text = NULL;
    assert_true(asprintf(&config_text,
                         "{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\",\"%s\"]}}", diff1,
                         diff2) > 0);
    sha256_of(config_text, strlen(config_text), config);
    char *manifest = NULL;
    assert_true(asprintf(&manifest,
                         "[{\"Config\":\"%s.json\",\"RepoTags\":[\"t:latest\"],\"Layers\":"
                         "[\"aaaa%s/layer.tar\",\"bbbb%s/layer.tar\"]}]",
                         config + 7, diff1 + 11, diff2 + 11) > 0);
    struct archive *a = tar_begin(f, "docker.tar", NULL);
    char name[200];
    snprintf(name, sizeof name, "aaaa%s/", diff1 + 11);
    tar_dir(a, name, 0755);
    snprintf(name, sizeof name, "aaaa%s/layer.tar", diff1 + 11);
    struct archive_entry *e = entry_new(name, AE_IFREG | 0644);
    archive_entry_set_size(e, (la_int64_t)len1);
    tar_write(a, e, layer1, len1);
    /* The second layer's file is a link to a copy elsewhere, as older
     * Docker made for layers that two images share. */
    snprintf(name, sizeof name, "cccc%s.tar", diff2 + 11);
    e = entry_new(name, AE_IFREG | 0644);
    archive_entry_set_size(e, (la_int64_t)len2);
    tar_write(a, e, layer2, len2);
    char link[200], target[200];
    snprintf(link, sizeof link, "bbbb%s/layer.tar", diff2 + 11);
    snprintf(target, sizeof target, "../cccc%s.tar", diff2 + 11);
    tar_symlink(a, link, target);
    snprintf(name, sizeof name, "%s.json", config + 7);
    tar_file(a, name, 0644, config_text);
    tar_file(a, "manifest.json", 0644, manifest);
    tar_file(a, "repositories", 0644, "{}");
    tar_end(a);
    free(layer1);
    free(layer2);
    free(config_text);
    free(manifest);
    assert_unpacks(f, "docker.tar");
    assert_two_layers_applied(f);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(rootfs_tar_unpacks_files_dirs_modes_and_links),
        T(rootfs_tar_keeps_owners_as_root),
        T(link_to_the_canary_is_refused_as_climbing_out),
        T(deeper_link_climbing_out_is_refused),
        T(member_through_a_link_to_the_hosts_root_is_refused),
        T(member_through_a_link_deeper_down_is_refused),
        T(dot_dot_member_is_refused),
        T(hard_link_out_of_the_image_is_refused),
        T(hard_link_to_what_is_not_an_unpacked_file_is_refused),
        T(devices_fifos_are_refused),
        T(set_uid_file_is_refused_unless_dropped),
        T(member_declaring_10_gib_is_refused_before_a_byte),
        T(sparse_member_is_refused),
        T(more_bytes_than_the_limit_are_refused),
        T(more_members_than_the_limit_are_refused),
        T(whiteout_in_a_root_filesystem_is_refused),
        T(missing_source_and_other_files_are_refused),
        T(oci_layout_applies_layers_with_whiteouts),
        T(oci_archive_applies_layers_and_leaves_no_scratch),
        T(oci_archive_blobs_count_towards_the_byte_limit),
        T(layout_whose_layer_does_not_match_its_digest_is_refused),
        T(layout_digest_naming_a_path_is_refused),
        T(layout_picks_this_platforms_manifest),
        T(docker_save_archive_applies_its_layers),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
