/* A paused E2B sandbox's processes to disk and back (issue 34): the
 * process's thread checkpoints its sandbox as a kernel's is
 * (sandbox/checkpoint.h) into <session>/hibernated-process-<pid>/, sleeps,
 * and restores it at the resume; a runbox after this one adopts what a
 * stopped one left there (processes.h, rbx_processes_pause_session). */
#include "base/error.h"
#include "engine/engine.h"
#include "kernels/hibernation.h"
#include "processes/process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>

static json_t *strings_json(const char *const *list, size_t count)
{
    json_t *array = json_array();
    for (size_t i = 0; array && i < count; i++)
        if (json_array_append_new(array, json_string(list[i])) != 0) {
            json_decref(array);
            return NULL;
        }
    return array;
}

/* What a process was started with, as its checkpoint's record keeps it
 * (request_from reads it back: a runbox after this one restores it). */
json_t *process_request_json(const rbx_process_request *r)
{
    return json_pack("{s:o, s:o, s:s?, s:s?, s:s?, s:b, s:i, s:o, s:i, s:f, s:i, s:i}", "argv",
                     strings_json(r->argv, r->argc), "env", strings_json(r->env, r->env_count),
                     "cwd", r->cwd, "tag", r->tag, "image", r->image, "stdin_open", r->stdin_open,
                     "network", r->network, "egress_allow",
                     strings_json(r->egress_allow, r->egress_allow_count), "memory_mb",
                     (int)r->memory_mb, "cpus", r->cpus, "cols", (int)r->cols, "rows",
                     (int)r->rows);
}

/* --- hibernation (a paused sandbox's, issue 34) ------------------------------------------- */

void process_checkpoint_name(uint32_t pid, char *name, size_t size)
{
    snprintf(name, size, "hibernated-process-%u", (unsigned)pid);
}

static void images_path(const rbx_process *p, char *path, size_t size)
{
    char name[48];
    process_checkpoint_name(p->pid, name, sizeof name);
    snprintf(path, size, "%s/%s/%s/images", p->engine->sessions_dir, p->session_id, name);
}

/* Whether this process's sandbox can go to disk; else why. Asks for the
 * prepared namespace, which a restore builds its root from. */
static bool dump_possible(rbx_process *p, char *why, size_t why_size)
{
    if (!rbx_hibernation_enabled(p->engine)) {
        snprintf(why, why_size, "this runbox does not hibernate (root, criu and --hibernate on)");
        return false;
    }
    p->spec.template_ns = rbx_root_template_ns(p->root);
    bool possible = rbx_checkpoint_possible(&p->sandbox, &p->spec, why, why_size);
    if (p->spec.template_ns >= 0)
        close(p->spec.template_ns);
    p->spec.template_ns = -1;
    return possible;
}

static uint64_t images_max(const rbx_process *p)
{
    return rbx_checkpoint_images_max(p->limits.memory_bytes);
}

static json_t *terminal_json(const rbx_process *p)
{
    if (!p->terminal)
        return json_null();
    const struct termios *m = &p->tty_mode;
    json_t *cc = json_array();
    for (size_t i = 0; cc && i < NCCS; i++)
        json_array_append_new(cc, json_integer(m->c_cc[i]));
    return json_pack("{s:i, s:i, s:I, s:I, s:I, s:I, s:o}", "cols", p->tty_size.ws_col, "rows",
                     p->tty_size.ws_row, "iflag", (json_int_t)m->c_iflag, "oflag",
                     (json_int_t)m->c_oflag, "cflag", (json_int_t)m->c_cflag, "lflag",
                     (json_int_t)m->c_lflag, "cc", cc);
}

/* What the restore is checked against: the root it ran on, on which host
 * kernel (criu restores on the one it dumped on). */
json_t *process_ran_on(const rbx_process *p)
{
    struct utsname host;
    if (uname(&host) != 0)
        host.release[0] = 0;
    return json_pack("{s:s, s:s, s:s}", "image", p->root->image, "digest", p->root->digest,
                     "host_kernel", host.release);
}

/* The record beside the images (a restore by a runbox after this one
 * reads it: adopt). */
static int write_record(rbx_process *p, int dir, uint64_t bytes)
{
    json_t *record = json_pack(
        "{s:i, s:s, s:s, s:i, s:s, s:I, s:O, s:o, s:o, s:o, s:b, s:I}", "version", 1, "kind",
        "process", "session", p->session_id, "pid", (int)p->pid, "digest", p->digest, "bytes",
        (json_int_t)bytes, "request", p->request, "terminal", terminal_json(p), "ran_on",
        process_ran_on(p), "checkpoint", rbx_checkpoint_to_json(p->checkpoint), "scratch",
        p->scratch_stowed, "at", (json_int_t)time(NULL));
    int rc = record ? rbx_checkpoint_record_write(dir, record) : -1;
    json_decref(record);
    return rc;
}

/* Dumps the running sandbox into <session>/hibernated-process-<pid>/,
 * in the session's disk cap, with its /tmp and a record, which ends its
 * tree (on the process's thread, its pump left). On failure the tree
 * runs on, its network and /tmp back. */
rbx_status process_dump(rbx_process *p, rbx_error *err)
{
    rbx_engine *engine = p->engine;
    char why[256], name[48], images[4600];
    if (!dump_possible(p, why, sizeof why))
        return rbx_fail(err, RBX_EINVAL, "the process cannot be checkpointed: %s", why);
    int session = rbx_checkpoint_session_open(engine, p->session_id);
    if (session < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open session %s: %s", p->session_id,
                        strerror(errno));
    process_checkpoint_name(p->pid, name, sizeof name);
    int dir = -1;
    rbx_status status = rbx_checkpoint_dir_make(engine, session, name, &dir, err);
    if (status == RBX_OK && !(p->checkpoint = calloc(1, sizeof *p->checkpoint)))
        status = rbx_fail(err, RBX_ESYSTEM, "out of memory");
    if (status == RBX_OK && p->terminal &&
        (tcgetattr(p->master, &p->tty_mode) != 0 || ioctl(p->master, TIOCGWINSZ, &p->tty_size)))
        status = rbx_fail(err, RBX_ESYSTEM, "cannot read the terminal's settings: %s",
                          strerror(errno));
    /* The scratch space first (its /tmp stays mounted in the tree), as a
     * kernel's: a checkpoint that fails puts it back. */
    bool had_scratch = p->scratch.made;
    if (status == RBX_OK && rbx_scratch_stow(engine, &p->scratch, dir, "scratch") != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot keep the process's /tmp: %s",
                          strerror(errno));
    p->scratch_stowed = status == RBX_OK && had_scratch;
    if (status == RBX_OK) {
        images_path(p, images, sizeof images);
        /* No input goes in while criu reads the pipe's. */
        pthread_mutex_lock(&p->write_lock);
        rbx_checkpoint_outside outside = {.channel_fd = -1,
                                          .stdin_fd = p->terminal ? -1 : p->input_fd,
                                          .master_fd = p->terminal ? p->master : -1};
        status = rbx_sandbox_checkpoint(&p->sandbox, &outside, rbx_kernel_criu(engine), images,
                                        p->checkpoint, err);
        pthread_mutex_unlock(&p->write_lock);
    }
    uint64_t bytes = 0;
    if (status == RBX_OK &&
        rbx_checkpoint_images_digest(dir, images_max(p), p->digest, &bytes) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "the process's checkpoint is larger than %llu MB",
                          (unsigned long long)(images_max(p) >> 20));
    if (status == RBX_OK && write_record(p, dir, bytes) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot write the process's checkpoint record: %s",
                          strerror(errno));
    if (status != RBX_OK && p->scratch_stowed &&
        rbx_scratch_unstow(engine, dir, "scratch", &p->scratch) != 0)
        fprintf(stderr, "runbox: process %u lost its /tmp: %s\n", (unsigned)p->pid,
                strerror(errno));
    if (status != RBX_OK)
        p->scratch_stowed = false;
    if (dir >= 0)
        close(dir);
    if (status == RBX_OK)
        rbx_checkpoint_dir_settle(engine, session);
    close(session);
    if (status != RBX_OK) {
        rbx_error back;
        if (p->network && rbx_sandbox_network_back(&p->spec, &p->sandbox, &back) != RBX_OK)
            fprintf(stderr, "runbox: process %u keeps running without its network: %s\n",
                    (unsigned)p->pid, back.message);
        free(p->checkpoint);
        p->checkpoint = NULL;
        rbx_checkpoint_dir_remove(engine, p->session_id, name);
    }
    return status;
}

/* Its checkpoint as it was written (the images' digest), and its /tmp
 * back where a restore takes it from. */
static rbx_status take_back(rbx_process *p, rbx_error *err)
{
    char name[48], digest[65];
    process_checkpoint_name(p->pid, name, sizeof name);
    int session = rbx_checkpoint_session_open(p->engine, p->session_id);
    int dir = session >= 0 ? openat(session, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                           : -1;
    uint64_t bytes;
    rbx_status status = RBX_OK;
    if (dir < 0)
        status = rbx_fail(err, RBX_ENOENT, "its checkpoint is gone: %s", strerror(errno));
    else if (rbx_checkpoint_images_digest(dir, images_max(p), digest, &bytes) != 0 ||
             strcmp(digest, p->digest))
        status = rbx_fail(err, RBX_EINVAL, "its checkpoint does not match its record (changed, "
                                           "or another's)");
    else if (p->scratch_stowed && rbx_scratch_unstow(p->engine, dir, "scratch", &p->scratch) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "its /tmp is missing: %s", strerror(errno));
    else
        p->scratch_stowed = false;
    p->spec.root_request.tmp_path = p->scratch.made ? p->scratch.tmp_path : NULL;
    if (dir >= 0)
        close(dir);
    if (session >= 0)
        close(session);
    return status;
}

/* Puts the hibernated tree back in a fresh sandbox (a new terminal with
 * the old one's settings), as its start did: this thread is its parent. */
rbx_status process_restore(rbx_process *p, rbx_error *err)
{
    char images[4600];
    images_path(p, images, sizeof images);
    rbx_status checked = take_back(p, err);
    if (checked != RBX_OK)
        return checked;
    if (p->terminal) {
        rbx_status status = process_open_terminal(p, p->tty_size.ws_col, p->tty_size.ws_row, err);
        if (status != RBX_OK)
            return status;
        (void)tcsetattr(p->master, TCSANOW, &p->tty_mode);
        p->spec.terminal_fd = p->slave;
    }
    p->spec.template_ns = rbx_root_template_ns(p->root);
    rbx_status status =
        p->spec.template_ns < 0
            ? rbx_fail(err, RBX_ESYSTEM, "the image's prepared namespace is gone")
            : rbx_sandbox_restore(&p->spec, p->checkpoint, rbx_kernel_criu(p->engine), images,
                                  &p->sandbox, err);
    if (p->spec.template_ns >= 0)
        close(p->spec.template_ns);
    p->spec.template_ns = -1;
    close_fd(&p->slave);
    p->spec.terminal_fd = -1;
    if (status != RBX_OK)
        return status;
    pid_t program = rbx_sandbox_program(&p->sandbox);
    p->program_pidfd = program > 0 ? (int)syscall(SYS_pidfd_open, program, 0) : -1;
    process_take_input(p);
    return RBX_OK;
}

/* --- adopting what a runbox before this one left on disk -------------------------------------- */

/* The strings of a JSON array (NULL where it is not one of strings). */
static const char **strings_of(json_t *array, size_t *count)
{
    *count = json_array_size(array);
    if (!json_is_array(array) || *count > RBX_PROCESS_ARGS_MAX + 4096)
        return NULL;
    const char **list = calloc(*count + 1, sizeof *list);
    for (size_t i = 0; list && i < *count; i++)
        if (!(list[i] = json_string_value(json_array_get(array, i)))) {
            free(list);
            return NULL;
        }
    return list;
}

/* A record's request as rbx_process_start takes one (its strings are the
 * record's); false where it is not one. */
static bool request_from(json_t *j, const char *session_id, rbx_process_request *r,
                         const char ***lists)
{
    memset(r, 0, sizeof *r); /* every field is the record's */
    r->session_id = session_id;
    r->argv = lists[0] = strings_of(json_object_get(j, "argv"), &r->argc);
    r->env = lists[1] = strings_of(json_object_get(j, "env"), &r->env_count);
    r->egress_allow = lists[2] =
        strings_of(json_object_get(j, "egress_allow"), &r->egress_allow_count);
    r->cwd = json_string_value(json_object_get(j, "cwd"));
    r->tag = json_string_value(json_object_get(j, "tag"));
    r->image = json_string_value(json_object_get(j, "image"));
    r->stdin_open = json_is_true(json_object_get(j, "stdin_open"));
    r->network = (int)json_integer_value(json_object_get(j, "network"));
    json_int_t memory = json_integer_value(json_object_get(j, "memory_mb"));
    json_int_t cols = json_integer_value(json_object_get(j, "cols"));
    json_int_t rows = json_integer_value(json_object_get(j, "rows"));
    r->cpus = json_number_value(json_object_get(j, "cpus"));
    if (memory < 0 || memory > UINT32_MAX || cols < 0 || cols > UINT16_MAX || rows < 0 ||
        rows > UINT16_MAX)
        return false;
    r->memory_mb = (uint32_t)memory;
    r->cols = (uint16_t)cols;
    r->rows = (uint16_t)rows;
    return r->argv && r->env && r->egress_allow;
}

static bool terminal_from(json_t *j, rbx_process *p)
{
    json_t *cc = json_object_get(j, "cc");
    json_int_t cols = json_integer_value(json_object_get(j, "cols"));
    json_int_t rows = json_integer_value(json_object_get(j, "rows"));
    if (!json_is_array(cc) || json_array_size(cc) != NCCS || cols < 1 ||
        cols > RBX_PROCESS_TERMINAL_MAX || rows < 1 || rows > RBX_PROCESS_TERMINAL_MAX)
        return false;
    p->tty_size = (struct winsize){.ws_col = (unsigned short)cols, .ws_row = (unsigned short)rows};
    p->tty_mode.c_iflag = (tcflag_t)json_integer_value(json_object_get(j, "iflag"));
    p->tty_mode.c_oflag = (tcflag_t)json_integer_value(json_object_get(j, "oflag"));
    p->tty_mode.c_cflag = (tcflag_t)json_integer_value(json_object_get(j, "cflag"));
    p->tty_mode.c_lflag = (tcflag_t)json_integer_value(json_object_get(j, "lflag"));
    for (size_t i = 0; i < NCCS; i++)
        p->tty_mode.c_cc[i] = (cc_t)json_integer_value(json_array_get(cc, i));
    return true;
}

static bool is_digest(const char *text)
{
    return text && strlen(text) == 64 && strspn(text, "0123456789abcdef") == 64;
}

bool process_record_request(json_t *record, const char *session_id, uint32_t pid,
                            rbx_process_request *r, const char ***lists)
{
    return record && json_integer_value(json_object_get(record, "version")) == 1 &&
           !strcmp(json_string_value(json_object_get(record, "kind")) ?: "", "process") &&
           !strcmp(json_string_value(json_object_get(record, "session")) ?: "", session_id) &&
           json_integer_value(json_object_get(record, "pid")) == (json_int_t)pid &&
           is_digest(json_string_value(json_object_get(record, "digest"))) &&
           request_from(json_object_get(record, "request"), session_id, r, lists);
}

bool process_record_take(rbx_process *p, json_t *record)
{
    snprintf(p->digest, sizeof p->digest, "%s",
             json_string_value(json_object_get(record, "digest")) ?: "");
    p->scratch_stowed = json_is_true(json_object_get(record, "scratch"));
    return (p->checkpoint = calloc(1, sizeof *p->checkpoint)) &&
           rbx_checkpoint_from_json(json_object_get(record, "checkpoint"), p->checkpoint, false) &&
           (p->checkpoint->tty_rdev != 0) == p->terminal &&
           (!p->terminal || terminal_from(json_object_get(record, "terminal"), p));
}
