/* E2B's contexts (see http.h): a list in memory, written whole to
 * <state>/e2b-contexts.json (a new file renamed over the old one) at each
 * change, so that a restarted server, or one killed while writing, finds
 * the last complete list. A context is found only through its own
 * sandbox: one sandbox's requests never reach another's contexts. */
#include "http/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define CONTEXTS_FILE "e2b-contexts.json"
/* The default context of a language is the session "e2b-<language>". */
#define DEFAULT_PREFIX "e2b-"

struct e2b_contexts {
    pthread_mutex_t lock;
    char *path;
    e2b_context *list;
    size_t count;
};

/* A context made with POST /contexts (a session of its own), not the
 * default one of a language: "<its session>-<language>" in a sandbox, or
 * "e2b-<language>" outside. Only these count against the caps, so a
 * sandbox's defaults always find room, whatever the others made. */
static bool made(const e2b_context *context)
{
    return !strcmp(context->session_id, context->id) &&
           (strncmp(context->id, DEFAULT_PREFIX, sizeof DEFAULT_PREFIX - 1) ||
            strcmp(context->id + sizeof DEFAULT_PREFIX - 1, context->language));
}

/* How many contexts of those made the sandbox has ("" too: the debug
 * sandbox), and the server in all (the lock held). */
static size_t made_count(const e2b_contexts *c, const char *sandbox)
{
    size_t n = 0;
    for (size_t i = 0; i < c->count; i++)
        n += made(&c->list[i]) && (!sandbox || !strcmp(c->list[i].sandbox, sandbox));
    return n;
}

/* Room for one more entry (the lock held): a list of a few thousand at
 * most, which glibc grows in place (mremap) once it is large. */
static bool grow(e2b_contexts *c)
{
    e2b_context *list = reallocarray(c->list, c->count + 1, sizeof *list);
    if (list) /* unchanged when it failed */
        c->list = list;
    return list != NULL;
}

json_t *e2b_context_json(const e2b_context *context)
{
    return json_pack("{s:s, s:s, s:s}", "id", context->id, "language", context->language, "cwd",
                     context->cwd);
}

/* What the file keeps: the listed fields, and whose it is. */
static json_t *entry_json(const e2b_context *context)
{
    json_t *entry = e2b_context_json(context);
    json_object_set_new(entry, "sandbox", json_string(context->sandbox));
    json_object_set_new(entry, "session_id", json_string(context->session_id));
    return entry;
}

/* Entries of a file written before sandboxes had contexts have neither
 * "sandbox" nor "session_id": theirs is "" and their own id. */
static bool valid_entry(json_t *entry, e2b_context *out)
{
    const char *id = json_string_value(json_object_get(entry, "id"));
    const char *language = json_string_value(json_object_get(entry, "language"));
    const char *cwd = json_string_value(json_object_get(entry, "cwd"));
    const char *sandbox = json_string_value(json_object_get(entry, "sandbox"));
    const char *session = json_string_value(json_object_get(entry, "session_id"));
    if (!sandbox)
        sandbox = "";
    if (!session)
        session = id;
    if (!id || !language || !cwd || !rbx_session_id_valid(id) || !rbx_runtime_canonical(language) ||
        cwd[0] != '/' || strlen(cwd) > RBX_KERNEL_CWD_MAX || strlen(sandbox) > E2B_SANDBOX_ID_MAX ||
        !rbx_session_id_valid(session))
        return false;
    snprintf(out->id, sizeof out->id, "%s", id);
    snprintf(out->sandbox, sizeof out->sandbox, "%s", sandbox);
    snprintf(out->session_id, sizeof out->session_id, "%s", session);
    snprintf(out->language, sizeof out->language, "%s", rbx_runtime_canonical(language));
    snprintf(out->cwd, sizeof out->cwd, "%s", cwd);
    return true;
}

/* Entries that do not make sense are skipped, not fatal: the file is
 * runbox's own, and a context lost is a 404 the SDK understands. */
static bool load(e2b_contexts *c, char *why, size_t why_size)
{
    bool absent;
    json_t *root = e2b_state_load(c->path, &absent, why, why_size);
    if (!root)
        return absent;
    json_t *list = json_object_get(root, "contexts");
    size_t i;
    json_t *entry;
    e2b_context context;
    size_t made_here = 0;
    /* A sandbox over its share (a file of an earlier server) keeps its
     * contexts, whose sessions go with it, and makes no more until under. */
    json_array_foreach(list, i, entry)
    {
        if (!valid_entry(entry, &context) ||
            (made(&context) ? made_here >= E2B_CONTEXTS_MAX
                            : c->count - made_here >= E2B_DEFAULT_CONTEXTS_MAX))
            continue;
        made_here += made(&context);
        if (!grow(c)) {
            json_decref(root);
            snprintf(why, why_size, "out of memory");
            return false;
        }
        c->list[c->count++] = context;
    }
    json_decref(root);
    return true;
}

static bool save(e2b_contexts *c)
{
    json_t *list = json_array();
    for (size_t i = 0; i < c->count; i++)
        json_array_append_new(list, entry_json(&c->list[i]));
    return e2b_state_save(c->path, json_pack("{s:o}", "contexts", list));
}

e2b_contexts *e2b_contexts_open(const char *state_dir, char *why, size_t why_size)
{
    e2b_contexts *c = calloc(1, sizeof *c);
    if (!c || asprintf(&c->path, "%s/" CONTEXTS_FILE, state_dir) < 0) {
        free(c);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    if (!load(c, why, why_size)) {
        e2b_contexts_free(c);
        return NULL;
    }
    /* E2B lists a default Python and JavaScript context from the start. */
    e2b_context unused;
    if (!e2b_contexts_default(c, "", NULL, "python", &unused) ||
        !e2b_contexts_default(c, "", NULL, "javascript", &unused)) {
        snprintf(why, why_size, "cannot write %s: %s", c->path, strerror(errno));
        e2b_contexts_free(c);
        return NULL;
    }
    return c;
}

void e2b_contexts_free(e2b_contexts *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c->list);
    free(c->path);
    free(c);
}

static e2b_context *find(e2b_contexts *c, const char *sandbox, const char *id)
{
    for (size_t i = 0; i < c->count; i++)
        if (!strcmp(c->list[i].id, id) && !strcmp(c->list[i].sandbox, sandbox))
            return &c->list[i];
    return NULL;
}

bool e2b_contexts_find(e2b_contexts *c, const char *sandbox, const char *id, e2b_context *out)
{
    pthread_mutex_lock(&c->lock);
    e2b_context *found = find(c, sandbox, id);
    if (found)
        *out = *found;
    pthread_mutex_unlock(&c->lock);
    return found != NULL;
}

/* Adds a context under the lock; false when not kept. */
static bool add(e2b_contexts *c, const e2b_context *context)
{
    if (!grow(c))
        return false;
    c->list[c->count++] = *context;
    if (save(c))
        return true;
    c->count--;
    return false;
}

/* Outside a sandbox the default context of a language is the session
 * "e2b-<language>" (as before sandboxes); in one, "<its session>-<language>"
 * names it, and its kernel runs in the sandbox's session. */
bool e2b_contexts_default(e2b_contexts *c, const char *sandbox, const char *session_id,
                          const char *language, e2b_context *out)
{
    e2b_context wanted = {.cwd = E2B_DEFAULT_CWD};
    if (session_id && *sandbox) {
        snprintf(wanted.id, sizeof wanted.id, "%.40s-%s", session_id, language);
        snprintf(wanted.session_id, sizeof wanted.session_id, "%s", session_id);
    } else {
        snprintf(wanted.id, sizeof wanted.id, DEFAULT_PREFIX "%s", language);
        snprintf(wanted.session_id, sizeof wanted.session_id, "%s", wanted.id);
    }
    snprintf(wanted.sandbox, sizeof wanted.sandbox, "%s", sandbox);
    snprintf(wanted.language, sizeof wanted.language, "%s", language);
    pthread_mutex_lock(&c->lock);
    e2b_context *found = find(c, sandbox, wanted.id);
    bool ok = found || (c->count - made_count(c, NULL) < E2B_DEFAULT_CONTEXTS_MAX &&
                        add(c, &wanted));
    *out = found ? *found : wanted;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

/* Why there is no room for one more made context of the sandbox (the
 * lock held); false when there is. */
static bool full(e2b_contexts *c, const char *sandbox, http_error *err)
{
    if (made_count(c, sandbox) >= E2B_SANDBOX_CONTEXTS_MAX)
        http_error_set(err, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_contexts",
                       "this sandbox has %d contexts of its own, the most a sandbox keeps: "
                       "remove one (DELETE /contexts/{id}, the SDK's remove_code_context) "
                       "before making another; its default contexts stay",
                       E2B_SANDBOX_CONTEXTS_MAX);
    else if (made_count(c, NULL) >= E2B_CONTEXTS_MAX)
        http_error_set(err, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_contexts",
                       "this server keeps %d contexts made with POST /contexts, the most it "
                       "keeps: remove one (DELETE /contexts/{id}, the SDK's "
                       "remove_code_context) before making another; the default contexts stay",
                       E2B_CONTEXTS_MAX);
    else
        return false;
    return true;
}

bool e2b_contexts_add(e2b_contexts *c, const char *sandbox, const char *language,
                      const char *cwd, e2b_context *out, http_error *err)
{
    unsigned char random[12];
    if (getrandom(random, sizeof random, 0) != (ssize_t)sizeof random) {
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "no randomness for a context id");
        return false;
    }
    e2b_context context = {0};
    int n = snprintf(context.id, sizeof context.id, DEFAULT_PREFIX "ctx-");
    for (size_t i = 0; i < sizeof random; i++)
        n += snprintf(context.id + n, sizeof context.id - (size_t)n, "%02x", random[i]);
    snprintf(context.session_id, sizeof context.session_id, "%s", context.id);
    snprintf(context.sandbox, sizeof context.sandbox, "%s", sandbox);
    snprintf(context.language, sizeof context.language, "%s", language);
    snprintf(context.cwd, sizeof context.cwd, "%s", cwd);
    pthread_mutex_lock(&c->lock);
    bool refused = full(c, sandbox, err);
    bool ok = !refused && add(c, &context);
    pthread_mutex_unlock(&c->lock);
    if (!ok && !refused)
        http_error_set(err, MHD_HTTP_SERVICE_UNAVAILABLE, "no_room",
                       "cannot write the contexts' list: %s", strerror(errno));
    else if (ok)
        *out = context;
    return ok;
}

bool e2b_contexts_remove(e2b_contexts *c, const char *sandbox, const char *id)
{
    pthread_mutex_lock(&c->lock);
    e2b_context *found = find(c, sandbox, id);
    if (found) {
        *found = c->list[--c->count];
        (void)save(c); /* gone from memory either way, as its session is */
    }
    pthread_mutex_unlock(&c->lock);
    return found != NULL;
}

json_t *e2b_contexts_list(e2b_contexts *c, const char *sandbox)
{
    json_t *list = json_array();
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->count; i++)
        if (!strcmp(c->list[i].sandbox, sandbox))
            json_array_append_new(list, e2b_context_json(&c->list[i]));
    pthread_mutex_unlock(&c->lock);
    return list;
}

/* The sessions of the sandbox's own contexts (those not in its session),
 * and with drop, the sandbox's contexts are forgotten. */
static e2b_name *sessions_of(e2b_contexts *c, const char *sandbox, bool drop, size_t *count)
{
    pthread_mutex_lock(&c->lock);
    e2b_name *names = calloc(c->count + 1, sizeof *names);
    size_t n = 0, kept = 0;
    for (size_t i = 0; i < c->count; i++) {
        const e2b_context *context = &c->list[i];
        bool its = !strcmp(context->sandbox, sandbox);
        if (its && names && !strcmp(context->session_id, context->id))
            snprintf(names[n++].text, sizeof names->text, "%s", context->session_id);
        if (!(its && drop))
            c->list[kept++] = *context;
    }
    if (kept != c->count) {
        c->count = kept;
        (void)save(c); /* gone from memory either way, as the sandbox is */
    }
    pthread_mutex_unlock(&c->lock);
    *count = n;
    return names;
}

e2b_name *e2b_contexts_remove_sandbox(e2b_contexts *c, const char *sandbox, size_t *count)
{
    return sessions_of(c, sandbox, true, count);
}

e2b_name *e2b_contexts_sessions(e2b_contexts *c, const char *sandbox, size_t *count)
{
    return sessions_of(c, sandbox, false, count);
}
