/* Unit tests of processes/ through the public API (rbx_process_*), on an
 * engine with a fresh state directory: a process's output, exit and
 * input, its terminal, signals, its end with its session, that it runs
 * beside an execution of its session, and that it is confined exactly as
 * an execution is (credentials, capabilities, seccomp, namespaces). */
#include "unit_util.h"

#include "runbox.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>

typedef struct fixture {
    char state_dir[64];
    rbx_engine *engine;
} fixture;

/* An engine on the fixture's state directory (a runbox started there). */
static rbx_engine *engine_on(fixture *f)
{
    rbx_config config;
    rbx_config_defaults(&config);
    config.state_dir = f->state_dir;
    config.storage = RBX_STORAGE_CHOOSE_PLAIN;
    config.network_off = true;
    rbx_error err = {0};
    rbx_engine *engine = rbx_engine_new(&config, &err);
    if (!engine)
        fail_msg("rbx_engine_new: %s", err.message);
    return engine;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->state_dir, sizeof f->state_dir, "proc");
    f->engine = engine_on(f);
    rbx_error err = {0};
    assert_int_equal(rbx_session_create(f->engine, "s1", &err), RBX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    rbx_engine_free(f->engine);
    /* The prepared root's namespace stays pinned in templates/ (for
     * the next runbox on the state directory): unpin it. */
    char dir[128];
    snprintf(dir, sizeof dir, "%s/templates", f->state_dir);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.')
            (void)umount2(path, MNT_DETACH);
    }
    if (d)
        closedir(d);
    remove_temp_tree(f->state_dir);
    free(f);
    return 0;
}

/* What a watcher saw. */
typedef struct seen {
    pthread_mutex_t lock;
    char out[65536], err[4096];
    size_t out_len, err_len;
    bool ended;
    rbx_process_event end;
    int frozen; /* the pause's word */
} seen;

static int on_event(void *user, const rbx_process_event *event)
{
    seen *s = user;
    pthread_mutex_lock(&s->lock);
    if (event->kind == RBX_PROCESS_END) {
        s->ended = true;
        s->end = *event;
        s->end.error = NULL;
    } else if (event->kind == RBX_PROCESS_FROZEN) {
        s->frozen++;
    } else if (event->kind == RBX_PROCESS_STDERR) {
        size_t n = event->len < sizeof s->err - 1 - s->err_len ? event->len
                                                               : sizeof s->err - 1 - s->err_len;
        memcpy(s->err + s->err_len, event->data, n);
        s->err_len += n;
    } else {
        size_t n = event->len < sizeof s->out - 1 - s->out_len ? event->len
                                                               : sizeof s->out - 1 - s->out_len;
        memcpy(s->out + s->out_len, event->data, n);
        s->out_len += n;
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static rbx_process *start(fixture *f, const char *script, bool stdin_open, uint16_t cols,
                          uint16_t rows, seen *s)
{
    const char *argv[] = {"/bin/bash", "-c", script};
    rbx_process_request r;
    rbx_process_request_init(&r);
    r.session_id = "s1";
    r.argv = argv;
    r.argc = 3;
    r.stdin_open = stdin_open;
    r.cols = cols;
    r.rows = rows;
    pthread_mutex_init(&s->lock, NULL);
    rbx_process *p = NULL;
    rbx_error err = {0};
    if (rbx_process_start(f->engine, &r, on_event, s, &p, &err) != RBX_OK)
        fail_msg("rbx_process_start: %s", err.message);
    return p;
}

static void a_process_streams_its_output_and_exit_code(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "echo out; echo err >&2; exit 3", false, 0, 0, &s);
    assert_true(rbx_process_pid(p) > 0);
    assert_true(rbx_process_wait(p, 20));
    assert_true(s.ended);
    assert_true(s.end.exited);
    assert_int_equal(s.end.exit_code, 3);
    assert_string_equal(s.out, "out\n");
    assert_string_equal(s.err, "err\n");
    rbx_process_free(p);
}

static void stdin_is_a_stream_until_closed(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "cat; echo done", true, 0, 0, &s);
    rbx_error err;
    assert_int_equal(rbx_process_write(p, "abc\n", 4, &err), RBX_OK);
    assert_int_equal(rbx_process_write(p, "def\n", 4, &err), RBX_OK);
    assert_int_equal(rbx_process_close_stdin(p, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    assert_string_equal(s.out, "abc\ndef\ndone\n");
    assert_int_equal(s.end.exit_code, 0);
    /* Ended: nothing more can be done to it. */
    assert_int_equal(rbx_process_write(p, "x", 1, &err), RBX_ENOENT);
    assert_int_equal(rbx_process_signal(p, SIGKILL, &err), RBX_ENOENT);
    rbx_process_free(p);
}

/* More than the stdin pipe holds goes in one call: it waits for the program to read. */
static void input_larger_than_the_pipe_reaches_the_program(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "wc -c", true, 0, 0, &s);
    size_t len = 3u << 20;
    char *data = malloc(len);
    assert_non_null(data);
    memset(data, 'x', len);
    rbx_error err;
    assert_int_equal(rbx_process_write(p, data, len, &err), RBX_OK);
    free(data);
    assert_int_equal(rbx_process_close_stdin(p, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    assert_string_equal(s.out, "3145728\n");
    rbx_process_free(p);
}

static bool output_has(seen *s, const char *text, double timeout_s)
{
    for (int i = 0; i < (int)(timeout_s * 100); i++) {
        pthread_mutex_lock(&s->lock);
        bool has = strstr(s->out, text) != NULL;
        pthread_mutex_unlock(&s->lock);
        if (has)
            return true;
        usleep(10000);
    }
    return false;
}

/* A program that closed its stdin: writing to it is an error for the
 * caller, not a SIGPIPE that would end the server (whose action for it is
 * the default, as this test's is). */
static void input_to_a_program_that_closed_stdin_is_an_error_not_a_signal(void **state)
{
    fixture *f = *state;
    seen s = {0};
    signal(SIGPIPE, SIG_DFL);
    rbx_process *p = start(f, "exec 0<&-; echo closed; sleep 30", true, 0, 0, &s);
    assert_true(output_has(&s, "closed", 20));
    rbx_error err;
    assert_int_equal(rbx_process_write(p, "x", 1, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "does not take input any more"));
    sigset_t pending;
    assert_int_equal(sigpending(&pending), 0);
    assert_false(sigismember(&pending, SIGPIPE)); /* taken, not left to arrive later */
    assert_int_equal(rbx_process_signal(p, SIGKILL, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    rbx_process_free(p);
}

/* Hibernation needs root and the criu make deps installs: elsewhere the
 * pause freezes instead (tests/e2b covers that), and these skip. */
static bool can_hibernate(void)
{
    return geteuid() == 0 && access("/var/lib/runbox/criu/criu", X_OK) == 0;
}

/* The last number in the output (a counter's). */
static long last_number(seen *s)
{
    pthread_mutex_lock(&s->lock);
    long last = -1;
    for (char *at = s->out; *at;) {
        char *end;
        long n = strtol(at, &end, 10);
        if (end != at) {
            last = n;
            at = end;
        } else {
            at++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return last;
}

/* Where session s1 keeps process pid's checkpoint, or part of it ("" for
 * its directory). */
static void checkpoint_path(char *path, size_t size, fixture *f, uint32_t pid, const char *part)
{
    snprintf(path, size, "%s/sessions/s1/hibernated-process-%u%s%s", f->state_dir, (unsigned)pid,
             *part ? "/" : "", part);
}

static bool has_checkpoint(fixture *f, uint32_t pid, const char *part)
{
    char path[512];
    checkpoint_path(path, sizeof path, f, pid, part);
    return access(path, F_OK) == 0;
}

/* Counts, and echoes each line of its stdin: a reader of its own (`read
 * -t` in the counting loop would lose a line whose reading the timeout
 * cut, as a loaded machine does), given stdin explicitly (a background
 * job of a shell without job control reads /dev/null otherwise). */
#define COUNTER_READING                                                                           \
    "(while read l; do echo got:$l; done) 0<&0 & i=0; while :; do i=$((i+1)); echo $i; "       \
    "sleep 0.05; done"

/* The end of a case that watched a process again after a resume. */
static void killed_and_freed(rbx_process *p, uint64_t watch)
{
    rbx_error err;
    assert_int_equal(rbx_process_signal(p, SIGKILL, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    rbx_process_unwatch(p, watch);
    rbx_process_free(p);
}

/* A new watcher of a resumed process (the pause ended the first's). */
static uint64_t watching_again(rbx_process *p, seen *after)
{
    pthread_mutex_init(&after->lock, NULL);
    uint64_t watch;
    rbx_error err;
    assert_int_equal(rbx_process_watch(p, on_event, after, &watch, &err), RBX_OK);
    return watch;
}

/* A counter reading its stdin, seen counting, then its session paused. */
static rbx_process *paused_counter(fixture *f, seen *s)
{
    rbx_process *p = start(f, COUNTER_READING, true, 0, 0, s);
    assert_true(output_has(s, "\n5\n", 20));
    assert_int_equal(rbx_session_pause(f->engine, "s1", true), 1);
    return p;
}

/* A paused session's command goes to disk (its memory freed, nothing of it
 * running) and comes back where it was: its counter goes on, its stdin is
 * open, and its number is the same. */
static void a_paused_command_goes_to_disk_and_comes_back(void **state)
{
    if (!can_hibernate())
        skip();
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = paused_counter(f, &s);
    uint32_t pid = rbx_process_pid(p);
    size_t running, frozen, hibernated;
    rbx_processes_count(f->engine, &running, &frozen, &hibernated);
    assert_int_equal(hibernated, 1);
    assert_int_equal(running + frozen, 0);
    assert_int_equal(s.frozen, 1);
    assert_true(has_checkpoint(f, pid, "images"));
    long at_pause = last_number(&s);
    usleep(300000);
    assert_int_equal(last_number(&s), at_pause); /* nothing of it runs */
    rbx_error err;
    assert_int_equal(rbx_process_write(p, "x\n", 2, &err), RBX_EBUSY);
    assert_int_equal(rbx_session_pause(f->engine, "s1", false), 1);
    assert_false(has_checkpoint(f, pid, "")); /* the checkpoint is gone once restored */
    rbx_process *found = NULL;
    assert_int_equal(rbx_process_find(f->engine, "s1", pid, &found, &err), RBX_OK);
    rbx_process_free(found);
    /* The output after the resume goes to a new watcher (the pause ended the first). */
    seen after = {0};
    uint64_t watch = watching_again(p, &after);
    assert_true(output_has(&after, "\n", 20));
    long resumed = last_number(&after);
    assert_int_equal(rbx_process_write(p, "hello\n", 6, &err), RBX_OK);
    assert_true(output_has(&after, "got:hello", 20));
    assert_true(resumed > at_pause); /* went on, not started again */
    assert_true(resumed < at_pause + 200);
    killed_and_freed(p, watch);
}

/* A terminal's shell keeps its variables and settings across a pause. */
static void a_paused_terminal_comes_back_with_its_shell(void **state)
{
    if (!can_hibernate())
        skip();
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "exec bash --norc -i", false, 100, 30, &s);
    rbx_error err;
    assert_int_equal(rbx_process_write(p, "kept=41; stty -echo\n", 20, &err), RBX_OK);
    usleep(300000);
    assert_int_equal(rbx_session_pause(f->engine, "s1", true), 1);
    size_t running, frozen, hibernated;
    rbx_processes_count(f->engine, &running, &frozen, &hibernated);
    assert_int_equal(hibernated, 1);
    assert_int_equal(rbx_session_pause(f->engine, "s1", false), 1);
    seen after = {0};
    uint64_t watch = watching_again(p, &after);
    const char *line = "echo value=$((kept+1)) size=$(stty size)\n";
    assert_int_equal(rbx_process_write(p, line, strlen(line), &err), RBX_OK);
    assert_true(output_has(&after, "value=42 size=30 100", 20));
    pthread_mutex_lock(&after.lock);
    bool echoed = strstr(after.out, "echo value") != NULL; /* stty -echo held */
    pthread_mutex_unlock(&after.lock);
    assert_false(echoed);
    killed_and_freed(p, watch);
}

/* A runbox that stops while the command is on disk leaves it there; the
 * next one on the state directory restores it when the sandbox resumes,
 * with its number, its counter going on and its stdin open. */
static void a_command_on_disk_outlives_its_runbox(void **state)
{
    if (!can_hibernate())
        skip();
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = paused_counter(f, &s);
    uint32_t pid = rbx_process_pid(p);
    long at_pause = last_number(&s);
    rbx_process_free(p);
    rbx_engine_free(f->engine); /* runbox stops */
    assert_true(has_checkpoint(f, pid, "checkpoint.json"));
    f->engine = engine_on(f);
    rbx_error err;
    rbx_process *found = NULL;
    assert_int_equal(rbx_process_find(f->engine, "s1", pid, &found, &err), RBX_ENOENT);
    assert_int_equal(rbx_session_pause(f->engine, "s1", false), 1);
    assert_int_equal(rbx_process_find(f->engine, "s1", pid, &found, &err), RBX_OK);
    seen after = {0};
    uint64_t watch = watching_again(found, &after);
    assert_true(output_has(&after, "\n", 20));
    long resumed = last_number(&after);
    assert_true(resumed > at_pause && resumed < at_pause + 200);
    assert_int_equal(rbx_process_write(found, "again\n", 6, &err), RBX_OK);
    assert_true(output_has(&after, "got:again", 20));
    /* A new process does not take its number. */
    seen other = {0};
    rbx_process *next = start(f, "true", false, 0, 0, &other);
    assert_true(rbx_process_pid(next) > pid);
    assert_true(rbx_process_wait(next, 20));
    rbx_process_free(next);
    killed_and_freed(found, watch);
}

/* What the next runbox finds on disk is checked before it is restored:
 * images changed after the checkpoint, a record edited to another
 * session, or another's images swapped in are refused (the process is
 * forgotten, its sandbox resumes without it), never restored. */
static void a_tampered_checkpoint_is_not_restored(void **state)
{
    if (!can_hibernate())
        skip();
    fixture *f = *state;
    rbx_error err;
    assert_int_equal(rbx_session_create(f->engine, "s2", &err), RBX_OK);
    seen a = {0}, b = {0}, c = {0};
    uint32_t pids[3];
    rbx_process *p[3] = {start(f, "sleep 300", false, 0, 0, &a),
                         start(f, "sleep 301", false, 0, 0, &b),
                         start(f, "sleep 302", false, 0, 0, &c)};
    for (int i = 0; i < 3; i++)
        pids[i] = rbx_process_pid(p[i]);
    usleep(200000);
    assert_int_equal(rbx_session_pause(f->engine, "s1", true), 3);
    for (int i = 0; i < 3; i++)
        rbx_process_free(p[i]);
    rbx_engine_free(f->engine);
    char path[512], other[1024];
    /* 1: an image truncated. */
    checkpoint_path(path, sizeof path, f, pids[0], "images");
    DIR *d = opendir(path);
    assert_non_null(d);
    bool cut = false;
    for (struct dirent *e; !cut && (e = readdir(d));)
        if (!strncmp(e->d_name, "pages-", 6)) {
            snprintf(other, sizeof other, "%s/%s", path, e->d_name);
            cut = truncate(other, 4096) == 0;
        }
    closedir(d);
    assert_true(cut);
    /* 2: the record says another session. */
    checkpoint_path(path, sizeof path, f, pids[1], "checkpoint.json");
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char text[65536];
    size_t len = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[len] = 0;
    char *at = strstr(text, "\"session\":\"s1\"");
    assert_non_null(at);
    at[12] = '2';
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fwrite(text, 1, len, out);
    fclose(out);
    /* 3: the third's images swapped for the first's (another process's). */
    checkpoint_path(path, sizeof path, f, pids[2], "images");
    checkpoint_path(other, sizeof other, f, pids[1], "images");
    char swap[1100];
    snprintf(swap, sizeof swap, "%s.swap", path);
    assert_int_equal(rename(path, swap), 0);
    assert_int_equal(rename(other, path), 0);
    assert_int_equal(rename(swap, other), 0);
    f->engine = engine_on(f);
    assert_int_equal(rbx_session_pause(f->engine, "s1", false), 0);
    for (int i = 0; i < 3; i++) {
        rbx_process *found = NULL;
        assert_int_equal(rbx_process_find(f->engine, "s1", pids[i], &found, &err), RBX_ENOENT);
        assert_false(has_checkpoint(f, pids[i], "")); /* forgotten */
    }
}

/* Killed while on disk: it ends (told as killed), its checkpoint goes. */
static void a_hibernated_command_killed_ends_and_leaves_nothing(void **state)
{
    if (!can_hibernate())
        skip();
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "sleep 300", false, 0, 0, &s);
    uint32_t pid = rbx_process_pid(p);
    usleep(200000);
    assert_int_equal(rbx_session_pause(f->engine, "s1", true), 1);
    assert_true(has_checkpoint(f, pid, ""));
    rbx_error err;
    assert_int_equal(rbx_process_signal(p, SIGKILL, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    assert_true(s.ended);
    assert_true(s.end.killed);
    assert_false(has_checkpoint(f, pid, ""));
    rbx_process_free(p);
}

static void without_stdin_input_is_refused(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "sleep 30", false, 0, 0, &s);
    rbx_error err;
    assert_int_equal(rbx_process_write(p, "x", 1, &err), RBX_EINVAL);
    assert_int_equal(rbx_process_resize(p, 80, 24, &err), RBX_EINVAL);
    assert_int_equal(rbx_process_signal(p, 31, &err), RBX_EINVAL);
    assert_int_equal(rbx_process_signal(p, SIGKILL, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    assert_false(s.end.exited);
    assert_int_equal(s.end.exit_code, -1);
    assert_int_equal(s.end.signal, SIGKILL);
    assert_true(s.end.killed);
    rbx_process_free(p);
}

static void sigterm_reaches_the_program(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
                           false, 0, 0, &s);
    for (int i = 0; i < 400 && !strstr(s.out, "ready"); i++)
        usleep(10000);
    rbx_error err;
    assert_int_equal(rbx_process_signal(p, SIGTERM, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    assert_non_null(strstr(s.out, "got-term"));
    assert_int_equal(s.end.exit_code, 7);
    rbx_process_free(p);
}

static void a_terminal_has_its_size_and_takes_input(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "stty size; read line; stty size; echo got=$line; tty -s && echo is-tty",
                           false, 100, 30, &s);
    for (int i = 0; i < 400 && !strstr(s.out, "30 100"); i++)
        usleep(10000);
    assert_non_null(strstr(s.out, "30 100"));
    rbx_error err;
    assert_int_equal(rbx_process_resize(p, 120, 40, &err), RBX_OK);
    assert_int_equal(rbx_process_write(p, "hello\n", 6, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    assert_non_null(strstr(s.out, "40 120"));
    assert_non_null(strstr(s.out, "got=hello"));
    assert_non_null(strstr(s.out, "is-tty"));
    assert_int_equal(s.end.exit_code, 0);
    assert_int_equal(rbx_process_resize(p, 0, 40, &err), RBX_EINVAL);
    rbx_process_free(p);
}

static void removing_the_session_kills_its_processes(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "sleep 300", false, 0, 0, &s);
    rbx_process_info *infos;
    size_t count;
    rbx_error err;
    assert_int_equal(rbx_process_list(f->engine, "s1", &infos, &count, &err), RBX_OK);
    assert_int_equal(count, 1);
    assert_int_equal(infos[0].pid, rbx_process_pid(p));
    assert_string_equal(infos[0].argv[0], "/bin/bash");
    rbx_process_infos_free(infos, count);
    if (rbx_session_remove(f->engine, "s1", 5, &err) != RBX_OK)
        fail_msg("rbx_session_remove: %s", err.message);
    assert_true(rbx_process_wait(p, 5));
    assert_true(s.end.killed);
    rbx_process *again;
    assert_int_equal(rbx_process_find(f->engine, "s1", rbx_process_pid(p), &again, &err),
                     RBX_ENOENT);
    rbx_process_free(p);
    /* A process cannot start in a session that is gone. */
    const char *argv[] = {"/bin/true"};
    rbx_process_request r;
    rbx_process_request_init(&r);
    r.session_id = "s1";
    r.argv = argv;
    r.argc = 1;
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &again, &err), RBX_ENOENT);
}

static void an_execution_runs_beside_a_process(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "echo from-process > shared.txt; sleep 300", false, 0, 0, &s);
    usleep(300000);
    rbx_request q;
    rbx_request_init(&q);
    q.language = "bash";
    q.code = "cat shared.txt";
    q.code_len = strlen(q.code);
    q.session_id = "s1";
    q.timeout_s = 20;
    rbx_result result;
    rbx_error err;
    assert_int_equal(rbx_execute(f->engine, &q, NULL, NULL, &result, &err), RBX_OK);
    assert_string_equal(result.output, "from-process\n");
    assert_false(result.timed_out);
    rbx_result_free(&result);
    assert_int_equal(rbx_process_signal(p, SIGKILL, &err), RBX_OK);
    assert_true(rbx_process_wait(p, 20));
    rbx_process_free(p);
}

/* The lines of /proc/self/status that say who a program is and what it
 * may do, and its namespaces: the same for a process as for an execution. */
#define IDENTITY                                                                                   \
    "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "         \
    "/proc/self/status; id; ulimit -a; cat /sys/fs/cgroup/memory.max 2>/dev/null; "               \
    "cat /sys/fs/cgroup/pids.max 2>/dev/null; hostname; ls /"

static void a_process_is_confined_as_an_execution_is(void **state)
{
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, IDENTITY, false, 0, 0, &s);
    assert_true(rbx_process_wait(p, 20));
    rbx_process_free(p);
    rbx_request q;
    rbx_request_init(&q);
    q.language = "bash";
    q.code = IDENTITY;
    q.code_len = strlen(q.code);
    q.session_id = "s1";
    rbx_result result;
    rbx_error err;
    assert_int_equal(rbx_execute(f->engine, &q, NULL, NULL, &result, &err), RBX_OK);
    assert_string_equal(s.out, result.output);
    assert_non_null(strstr(s.out, "Seccomp:\t2"));
    assert_non_null(strstr(s.out, "CapEff:\t0000000000000000"));
    assert_non_null(strstr(s.out, "NoNewPrivs:\t1"));
    rbx_result_free(&result);
    /* Its namespaces are its own, not the host's. */
    seen t = {0};
    p = start(f, "readlink /proc/self/ns/pid /proc/self/ns/mnt /proc/self/ns/net /proc/self/ns/user",
              false, 0, 0, &t);
    assert_true(rbx_process_wait(p, 20));
    rbx_process_free(p);
    const char *names[] = {"pid", "mnt", "net", "user"};
    for (size_t i = 0; i < 4; i++) {
        char path[64], host[64] = "";
        snprintf(path, sizeof path, "/proc/self/ns/%s", names[i]);
        ssize_t n = readlink(path, host, sizeof host - 1);
        assert_true(n > 0);
        assert_null(strstr(t.out, host));
    }
}

/* Restored from disk, a process is confined exactly as it was started:
 * the same credentials, capabilities, seccomp, limits, hostname and root,
 * and namespaces of its own, not the host's nor the restorer's. */
static void a_restored_process_is_confined_as_a_started_one(void **state)
{
    if (!can_hibernate())
        skip();
    fixture *f = *state;
    seen s = {0};
    rbx_process *p = start(f, "while read l; do " IDENTITY "; readlink /proc/self/ns/pid "
                              "/proc/self/ns/mnt /proc/self/ns/net /proc/self/ns/user "
                              "/proc/self/ns/cgroup; echo END-$l; done",
                           true, 0, 0, &s);
    rbx_error err;
    assert_int_equal(rbx_process_write(p, "1\n", 2, &err), RBX_OK);
    assert_true(output_has(&s, "END-1", 20));
    pthread_mutex_lock(&s.lock);
    char *started = strdup(s.out);
    pthread_mutex_unlock(&s.lock);
    assert_non_null(started);
    assert_non_null(strstr(started, "Seccomp:\t2"));
    assert_non_null(strstr(started, "CapEff:\t0000000000000000"));
    assert_int_equal(rbx_session_pause(f->engine, "s1", true), 1);
    assert_int_equal(rbx_session_pause(f->engine, "s1", false), 1);
    seen after = {0};
    uint64_t watch = watching_again(p, &after);
    assert_int_equal(rbx_process_write(p, "1\n", 2, &err), RBX_OK);
    assert_true(output_has(&after, "END-1", 20));
    pthread_mutex_lock(&after.lock);
    /* The namespaces are new ones (a fresh sandbox), so their numbers
     * differ; everything before them is the same. */
    char *ns_then = strstr(started, "pid:["), *ns_now = strstr(after.out, "pid:[");
    assert_non_null(ns_then);
    assert_non_null(ns_now);
    assert_int_equal(ns_then - started, ns_now - after.out);
    assert_memory_equal(started, after.out, (size_t)(ns_then - started));
    const char *names[] = {"pid", "mnt", "net", "user", "cgroup"};
    for (size_t i = 0; i < 5; i++) {
        char path[64], host[64] = "";
        snprintf(path, sizeof path, "/proc/self/ns/%s", names[i]);
        ssize_t n = readlink(path, host, sizeof host - 1);
        assert_true(n > 0);
        assert_null(strstr(after.out, host)); /* not the host's (nor the restorer's: a child) */
    }
    pthread_mutex_unlock(&after.lock);
    free(started);
    killed_and_freed(p, watch);
}

static void the_cap_of_processes_per_session_holds(void **state)
{
    fixture *f = *state;
    seen s[RBX_PROCESSES_MAX] = {0};
    rbx_process *p[RBX_PROCESSES_MAX];
    for (int i = 0; i < RBX_PROCESSES_MAX; i++)
        p[i] = start(f, "sleep 300", false, 0, 0, &s[i]);
    const char *argv[] = {"/bin/true"};
    rbx_process_request r;
    rbx_process_request_init(&r);
    r.session_id = "s1";
    r.argv = argv;
    r.argc = 1;
    rbx_process *more;
    rbx_error err;
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &more, &err), RBX_EBUSY);
    assert_int_equal(rbx_session_cancel(f->engine, "s1"), RBX_PROCESSES_MAX);
    for (int i = 0; i < RBX_PROCESSES_MAX; i++) {
        assert_true(rbx_process_wait(p[i], 5));
        rbx_process_free(p[i]);
    }
}

static void a_bad_request_is_refused(void **state)
{
    fixture *f = *state;
    rbx_process_request r;
    rbx_process *p;
    rbx_error err;
    const char *argv[] = {"/bin/true"};
    const char *env[] = {"1BAD=x"};
    rbx_process_request_init(&r);
    r.session_id = "s1";
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &p, &err), RBX_EINVAL);
    r.argv = argv;
    r.argc = 1;
    r.cwd = "relative";
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &p, &err), RBX_EINVAL);
    r.cwd = "/nowhere";
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &p, &err), RBX_EINVAL);
    r.cwd = NULL;
    r.cols = 65535;
    r.rows = 10;
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &p, &err), RBX_EINVAL);
    r.cols = r.rows = 0;
    r.env = env;
    r.env_count = 1;
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &p, &err), RBX_EINVAL);
    r.env_count = 0;
    r.session_id = "../x";
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &p, &err), RBX_EINVAL);
    r.session_id = "nosuch";
    assert_int_equal(rbx_process_start(f->engine, &r, NULL, NULL, &p, &err), RBX_ENOENT);
    const char *missing[] = {"/no/such/program"};
    r.session_id = "s1";
    r.argv = missing;
    rbx_status status = rbx_process_start(f->engine, &r, NULL, NULL, &p, &err);
    if (status != RBX_EINVAL)
        fail_msg("a missing program: %d %s", status, status == RBX_OK ? "" : err.message);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("skipped: sandboxes here need root\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_process_streams_its_output_and_exit_code, setup, teardown),
        cmocka_unit_test_setup_teardown(stdin_is_a_stream_until_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(input_larger_than_the_pipe_reaches_the_program, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            input_to_a_program_that_closed_stdin_is_an_error_not_a_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(a_paused_command_goes_to_disk_and_comes_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_paused_terminal_comes_back_with_its_shell, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_hibernated_command_killed_ends_and_leaves_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_command_on_disk_outlives_its_runbox, setup, teardown),
        cmocka_unit_test_setup_teardown(a_tampered_checkpoint_is_not_restored, setup, teardown),
        cmocka_unit_test_setup_teardown(without_stdin_input_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(sigterm_reaches_the_program, setup, teardown),
        cmocka_unit_test_setup_teardown(a_terminal_has_its_size_and_takes_input, setup, teardown),
        cmocka_unit_test_setup_teardown(removing_the_session_kills_its_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(an_execution_runs_beside_a_process, setup, teardown),
        cmocka_unit_test_setup_teardown(a_process_is_confined_as_an_execution_is, setup, teardown),
        cmocka_unit_test_setup_teardown(a_restored_process_is_confined_as_a_started_one, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_cap_of_processes_per_session_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(a_bad_request_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
