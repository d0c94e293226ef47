/* Moving a session with its hibernated kernels (issue 34): `sessions
 * export` carries each hibernated kernel's checkpoint beside the files,
 * and `import` on another node lets the kernel wake there from it.
 *
 * Why a signature. A checkpoint's images are restored by criu as uid 0 of
 * a user namespace that maps every id to itself (hibernation notes): the
 * images it reads decide what it opens and which processes it makes, with
 * those powers and before any seccomp filter. Images this node wrote are
 * criu's own; images from an archive could be anyone's. So export signs
 * each checkpoint's record (which holds the images' SHA-256, the session,
 * and what the kernel was started with: image digest, host kernel) with
 * HMAC-SHA-256 under the node's key, and import lets a kernel wake only
 * from a record signed with its own key; a wake checks the images against
 * the record as for a local checkpoint. The key is <state dir>/checkpoint.key,
 * made on first use (32 random bytes, 0600); the nodes that move sessions
 * between them are given the same file by their operator (deploy/README).
 * A checkpoint that fails its check leaves a tombstone with the reason:
 * the session's next call starts that kernel afresh and says why
 * (kernel_restarted, restart_reason). Its files are imported regardless. */
#include "base/error.h"
#include "base/fsutil.h"
#include "base/nettle_lib.h"
#include "engine/engine.h"
#include "kernels/hibernation.h"
#include "kernels/kernels.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sessions/storage.h"
#include "sessions/transfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_FILE "checkpoint.key"
#define KEY_MIN 16
#define KEY_MADE 32
#define KEY_MAX 4096
/* What the signature covers besides the record: a signature of anything
 * else made with the same key is no signature of a checkpoint. */
#define SIGNED_AS "runbox checkpoint record 1\n"

/* --- the key ----------------------------------------------------------------------------- */

/* Reads the node's key into key (*len bytes); makes it first when make
 * says so. Refuses a key anyone but its owner (this process's user) could
 * read or replace. 0, or -1 with why. */
static int node_key(rbx_engine *engine, bool make, uint8_t key[KEY_MAX], size_t *len, char *why,
                    size_t why_size)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", engine->state_dir, KEY_FILE);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && make) {
        uint8_t fresh[KEY_MADE];
        int made = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (made >= 0) {
            bool ok = getrandom(fresh, sizeof fresh, 0) == (ssize_t)sizeof fresh &&
                      rbx_write_all(made, fresh, sizeof fresh) == 0 && fsync(made) == 0;
            close(made);
            if (!ok)
                unlink(path);
        }
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC); /* ours, or a racing maker's */
    }
    struct stat st;
    ssize_t n = -1;
    bool ok = false;
    if (fd < 0)
        snprintf(why, why_size, "this node has no checkpoint key (%.200s: %s)", path,
                 strerror(errno));
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
             (st.st_mode & 077))
        snprintf(why, why_size,
                 "this node's checkpoint key %.200s must be a regular file of runbox's user that no "
                 "one else can read or write (mode 0600)",
                 path);
    else if ((n = read(fd, key, KEY_MAX)) < KEY_MIN || st.st_size > KEY_MAX)
        snprintf(why, why_size, "this node's checkpoint key %.200s must hold %d to %d bytes", path,
                 KEY_MIN, KEY_MAX);
    else
        ok = true;
    if (fd >= 0)
        close(fd);
    *len = ok ? (size_t)n : 0;
    return ok ? 0 : -1;
}

/* HMAC-SHA-256 of a record under key, in hex. */
static void sign(const uint8_t *key, size_t key_len, const char *record, size_t len,
                 char hex[2 * SHA256_DIGEST_SIZE + 1])
{
    struct hmac_sha256_ctx ctx;
    uint8_t mac[SHA256_DIGEST_SIZE];
    rbx_nettle->hmac_sha256_set_key(&ctx, key_len, key);
    rbx_nettle->hmac_sha256_update(&ctx, strlen(SIGNED_AS), (const uint8_t *)SIGNED_AS);
    rbx_nettle->hmac_sha256_update(&ctx, len, (const uint8_t *)record);
    rbx_nettle->hmac_sha256_digest(&ctx, sizeof mac, mac);
    for (size_t i = 0; i < sizeof mac; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

/* Whether the archive's signature is this one, compared in a time that
 * does not depend on where they differ: a comparison that stops at the
 * first difference would let someone who times imports find the
 * signature of a record of theirs byte by byte. */
static bool same_signature(const char *theirs, size_t len, const char *mine)
{
    if (len != strlen(mine))
        return false;
    unsigned char differ = 0;
    for (size_t i = 0; i < len; i++)
        differ |= (unsigned char)(theirs[i] ^ mine[i]);
    return differ == 0;
}

/* A small regular file of dir, whole, NUL-terminated; NULL if it is not
 * one. */
static char *read_small(int dir, const char *name, size_t *len)
{
    int fd = rbx_open_regular(dir, name, O_RDONLY);
    struct stat st;
    char *text = fd >= 0 && fstat(fd, &st) == 0 && st.st_size < RBX_CHECKPOINT_RECORD_MAX
                     ? malloc((size_t)st.st_size + 1)
                     : NULL;
    ssize_t n = text ? read(fd, text, (size_t)st.st_size) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0 || !text || (off_t)n != st.st_size) {
        free(text);
        return NULL;
    }
    text[n] = 0;
    *len = (size_t)n;
    return text;
}

/* --- export -------------------------------------------------------------------------------- */

/* The images, but criu's logs and pid file (they name the host's paths
 * and pids, and a restore makes its own). */
static rbx_status add_images(rbx_transfer_out *out, int dir, const char *prefix, rbx_error *err)
{
    int fd = openat(dir, "images", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return rbx_fail(err, RBX_ESYSTEM, "cannot read a kernel's checkpoint: %s",
                        strerror(errno));
    }
    rbx_status status = RBX_OK;
    struct dirent *e;
    char path[512];
    while (status == RBX_OK && (e = readdir(d))) {
        if (!rbx_checkpoint_image_named(e->d_name))
            continue;
        snprintf(path, sizeof path, "%simages/%s", prefix, e->d_name);
        status = rbx_transfer_add_file(out, dirfd(d), e->d_name, path, RBX_TRANSFER_PART_CHECKPOINT);
    }
    closedir(d);
    return status;
}

/* One hibernated kernel's checkpoint: its signature, record, images and
 * /tmp. */
static rbx_status add_checkpoint(rbx_engine *engine, int session_dir, const char *language,
                                 rbx_transfer_out *out, rbx_error *err)
{
    char name[64], prefix[96], path[160], why[400], signature[2 * SHA256_DIGEST_SIZE + 1];
    snprintf(name, sizeof name, "hibernated-%s", language);
    snprintf(prefix, sizeof prefix, RBX_TRANSFER_PART_PREFIX "%s/", language);
    int dir = openat(session_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    size_t len = 0, key_len = 0;
    char *record = dir >= 0 ? read_small(dir, RBX_CHECKPOINT_RECORD, &len) : NULL;
    if (!record) { /* hibernated, but nothing to carry: its next call says so there too */
        if (dir >= 0)
            close(dir);
        return RBX_OK;
    }
    uint8_t *key = malloc(KEY_MAX);
    rbx_status status = key ? rbx_nettle_load(err) : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    if (status == RBX_OK && node_key(engine, true, key, &key_len, why, sizeof why) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot sign the %s kernel's checkpoint: %s",
                          language, why);
    if (status == RBX_OK) {
        sign(key, key_len, record, len, signature);
        snprintf(path, sizeof path, "%ssignature", prefix);
        status = rbx_transfer_add_bytes(out, path, RBX_TRANSFER_PART_CHECKPOINT, signature,
                                        strlen(signature));
    }
    snprintf(path, sizeof path, "%s" RBX_CHECKPOINT_RECORD, prefix);
    if (status == RBX_OK)
        status = rbx_transfer_add_bytes(out, path, RBX_TRANSFER_PART_CHECKPOINT, record, len);
    if (status == RBX_OK)
        status = add_images(out, dir, prefix, err);
    int tmp = status == RBX_OK
                  ? openat(dir, "scratch/tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                  : -1;
    snprintf(path, sizeof path, "%stmp/", prefix);
    if (tmp >= 0) {
        status = rbx_transfer_add_tree(out, tmp, path, RBX_TRANSFER_PART_CHECKPOINT);
        close(tmp);
    }
    if (key)
        explicit_bzero(key, KEY_MAX);
    free(key);
    free(record);
    close(dir);
    return status;
}

static rbx_status add_checkpoints(void *user, int session_dir, rbx_transfer_out *out,
                                  rbx_error *err)
{
    rbx_engine *engine = user;
    rbx_status status = RBX_OK;
    for (size_t i = 0; status == RBX_OK && i < rbx_runtime_count(); i++) {
        const char *language = rbx_runtime_name(i);
        if (rbx_kernel_hibernated_in(session_dir, language))
            status = add_checkpoint(engine, session_dir, language, out, err);
    }
    return status;
}

rbx_status rbx_session_export(rbx_engine *engine, const char *id, int out_fd, rbx_error *err)
{
    return rbx_transfer_export(engine, id, out_fd, add_checkpoints, engine, err);
}

/* --- import -------------------------------------------------------------------------------- */

/* Why the checkpoint carried in for language may not be woken from, in
 * why ("" when it may). */
static void check_carried(rbx_engine *engine, int dir, const char *language, char *why,
                          size_t why_size)
{
    size_t len = 0, signature_len = 0, key_len = 0;
    char *record = read_small(dir, RBX_CHECKPOINT_RECORD, &len);
    char *signature = read_small(dir, "signature", &signature_len);
    char mine[2 * SHA256_DIGEST_SIZE + 1], key_why[400];
    uint8_t *key = malloc(KEY_MAX);
    rbx_error ignored;
    why[0] = 0;
    if (!record || !signature)
        snprintf(why, why_size, "the archive carried the %s kernel's checkpoint without its "
                                "record or signature", language);
    else if (!key || rbx_nettle_load(&ignored) != RBX_OK)
        snprintf(why, why_size, "its checkpoint's signature could not be checked here");
    else if (node_key(engine, true, key, &key_len, key_why, sizeof key_why) != 0)
        snprintf(why, why_size, "its checkpoint's signature could not be checked: %s", key_why);
    if (!why[0]) {
        sign(key, key_len, record, len, mine);
        if (!same_signature(signature, signature_len, mine))
            snprintf(why, why_size,
                     "its checkpoint was not signed with this node's key (nodes that move "
                     "sessions between them share %.200s/" KEY_FILE ")",
                     engine->state_dir);
    }
    if (key)
        explicit_bzero(key, KEY_MAX);
    free(key);
    free(record);
    free(signature);
}

static rbx_status adopt(void *user, int session_dir, const char *session_id, const char *language,
                        rbx_error *err)
{
    rbx_engine *engine = user;
    char name[64], why[600];
    snprintf(name, sizeof name, "hibernated-%s", language);
    int dir = openat(session_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open the %s kernel's checkpoint: %s", language,
                        strerror(errno));
    const rbx_runtime *runtime = rbx_runtime_find(language);
    uint64_t bytes = 0;
    if (!runtime || !runtime->kernel_driver)
        snprintf(why, sizeof why, "%s has no stateful kernel", language);
    else
        check_carried(engine, dir, language, why, sizeof why);
    if (!why[0] && (unlinkat(dir, "signature", 0) != 0 ||
                    rbx_hibernation_rebind(engine, session_dir, session_id, language,
                                           &bytes) != 0))
        snprintf(why, sizeof why, "its checkpoint could not be taken in: %s", strerror(errno));
    close(dir);
    if (why[0]) {
        fprintf(stderr, "runbox: the %s kernel of imported session %s will start afresh: %s\n",
                language, session_id, why);
        (void)rbx_storage_remove(engine, session_dir, name);
    }
    char lost[700];
    snprintf(lost, sizeof lost, "the kernel hibernated on another node, but %s", why);
    if (rbx_kernel_mark_carried(session_dir, language, bytes, why[0] ? lost : NULL) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot record the %s kernel's checkpoint: %s",
                        language, strerror(errno));
    return RBX_OK;
}

rbx_status rbx_session_import(rbx_engine *engine, const char *id, const rbx_archive_source *from,
                              rbx_session_import_info *info, rbx_error *err)
{
    return rbx_transfer_import(engine, id, from, info, adopt, engine, err);
}
