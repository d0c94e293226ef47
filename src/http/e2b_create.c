/* The body of E2B's create request (NewSandboxV2, E2B-SANDBOX-PROTOCOL.md
 * section 2) turned into a sandbox's settings, every field checked for its
 * type and size. What runbox cannot do as asked is refused with 400 and
 * why, never ignored: a sandbox that silently reaches more than its
 * creator asked for would be worse than none. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Metadata and envVars are kept in the state directory and sent with every
 * listing: bounded. */
#define METADATA_MAX_KEYS 64
#define METADATA_MAX_KEY 256
#define METADATA_MAX_VALUE 2048
#define ENV_MAX_VARS 128
#define ENV_MAX_BYTES (32 * 1024)

/* E2B's code-interpreter and base templates run on the operator's default
 * image (which has Python, Node.js and Bash). */
static const char *const default_templates[] = {"code-interpreter-v1", "code-interpreter",
                                                "base", NULL};

/* "'field' must be what" */
static bool wrong(http_error *err, const char *field, const char *what)
{
    http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request", "'%s' must be %s", field, what);
    return false;
}

static bool refuse(http_error *err, const char *why)
{
    http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request", "%s", why);
    return false;
}

static bool is_default_template(const char *name)
{
    for (const char *const *t = default_templates; *t; t++)
        if (!strcmp(name, *t))
            return true;
    return false;
}

/* Another template names a runbox image that requests may name
 * (--allow-images, GET /v1/images); "" for the default ones. */
static bool template_image(http_server *server, const char *template_id, char *image,
                           size_t size, http_error *err)
{
    *image = 0;
    if (is_default_template(template_id))
        return true;
    rbx_image_info *infos = NULL;
    size_t count = 0;
    rbx_error engine_err;
    if (rbx_image_list_nameable(server->engine, &infos, &count, &engine_err) != RBX_OK) {
        http_error_from_engine(err, &engine_err);
        return false;
    }
    char served[600] = "";
    size_t used = 0;
    bool found = false;
    for (size_t i = 0; i < count; i++) {
        found = found || !strcmp(infos[i].name, template_id);
        if (used < sizeof served)
            used += (size_t)snprintf(served + used, sizeof served - used, ", %s", infos[i].name);
    }
    free(infos);
    if (!found) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "template '%.128s' is not served here: templateID is "
                       "code-interpreter-v1, code-interpreter or base (the default image), or "
                       "the name of a runbox image requests may name (here: %s)",
                       template_id, used ? served + 2 : "none");
        return false;
    }
    snprintf(image, size, "%s", template_id);
    return true;
}

/* An optional object of strings; NULL when absent or null. */
static bool strings_field(json_t *body, const char *name, json_t **out, http_error *err)
{
    json_t *value = json_object_get(body, name);
    *out = NULL;
    if (!value || json_is_null(value))
        return true;
    if (!json_is_object(value))
        return wrong(err, name, "an object of strings");
    const char *key;
    json_t *item;
    json_object_foreach(value, key, item)
    {
        if (!json_is_string(item))
            return wrong(err, name, "an object of strings");
    }
    *out = value;
    return true;
}

static bool metadata_ok(json_t *metadata, http_error *err)
{
    if (json_object_size(metadata) > METADATA_MAX_KEYS) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'metadata' has %zu keys: at most %d are kept",
                       json_object_size(metadata), METADATA_MAX_KEYS);
        return false;
    }
    const char *key;
    json_t *value;
    json_object_foreach(metadata, key, value)
    {
        if (!*key || strlen(key) > METADATA_MAX_KEY ||
            json_string_length(value) > METADATA_MAX_VALUE) {
            http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                           "'metadata' keys are 1 to %d bytes and values at most %d bytes",
                           METADATA_MAX_KEY, METADATA_MAX_VALUE);
            return false;
        }
    }
    return true;
}

/* The names runbox's engine accepts (request.c): [A-Za-z_][A-Za-z0-9_]*,
 * not those it sets itself. Checked here so that a bad one is refused at
 * create, not at every execution after. */
static bool env_name_ok(const char *name)
{
    static const char *const reserved[] = {"HOME", "PWD", "OLDPWD", "USER", "LOGNAME", NULL};
    size_t len = strlen(name);
    if (len == 0 || len > 128 || (name[0] >= '0' && name[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    for (const char *const *r = reserved; *r; r++)
        if (!strcmp(name, *r))
            return false;
    return true;
}

static bool env_vars_ok(json_t *env, http_error *err)
{
    size_t total = 0;
    const char *key;
    json_t *value;
    json_object_foreach(env, key, value)
    {
        if (!env_name_ok(key)) {
            http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                           "'envVars' name '%.64s' is not accepted: names match "
                           "[A-Za-z_][A-Za-z0-9_]* (at most 128 bytes), and HOME, PWD, OLDPWD, "
                           "USER and LOGNAME are runbox's",
                           key);
            return false;
        }
        total += strlen(key) + json_string_length(value) + 2;
    }
    if (json_object_size(env) > ENV_MAX_VARS || total > ENV_MAX_BYTES) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'envVars' may hold at most %d variables and %d bytes", ENV_MAX_VARS,
                       ENV_MAX_BYTES);
        return false;
    }
    return true;
}

/* A destination as it may be written: a CIDR, an address or a domain
 * name (a leading "*." allowed). The engine checks each precisely when an
 * execution uses it; this refuses at create what can never be one. */
static bool destination_shaped(const char *text)
{
    size_t len = strlen(text);
    if (len == 0 || len > 253)
        return false;
    return strspn(text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:/*-_") ==
           len;
}

static bool string_array(json_t *value, size_t max)
{
    size_t i;
    json_t *item;
    if (!json_is_array(value) || json_array_size(value) > max)
        return false;
    json_array_foreach(value, i, item)
    {
        if (!json_is_string(item) || !destination_shaped(json_string_value(item)))
            return false;
    }
    return true;
}

/* Whether denyOut denies everything (E2B's way of asking for an allow
 * list: allowOut wins over denyOut). */
static bool denies_all(json_t *deny)
{
    size_t i;
    json_t *item;
    json_array_foreach(deny, i, item)
    {
        const char *text = json_string_value(item);
        if (!strcmp(text, "0.0.0.0/0") || !strcmp(text, "::/0"))
            return true;
    }
    return false;
}

/* network: {allowOut, denyOut, allowPublicTraffic, ...}. runbox narrows a
 * sandbox's egress by an allow list only (rbx_request.egress_allow): denyOut
 * must deny everything (then allowOut is the list, or nothing is reached);
 * allowOut alone adds nothing to what is already open. The operator's
 * policy (--egress-*) still bounds all of it. */
static bool network_settings(json_t *body, e2b_sandbox *s, http_error *err)
{
    json_t *network = json_object_get(body, "network");
    if (!network || json_is_null(network))
        return true;
    if (!json_is_object(network))
        return wrong(err, "network", "an object");
    const char *key;
    json_t *value;
    json_object_foreach(network, key, value)
    {
        bool empty = json_is_null(value) || (json_is_array(value) && !json_array_size(value)) ||
                     (json_is_object(value) && !json_object_size(value));
        if (strcmp(key, "allowOut") && strcmp(key, "denyOut") &&
            strcmp(key, "allowPublicTraffic") && !empty)
        {
            http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                           "network.%.64s is not served by runbox: a sandbox's network takes "
                           "allowOut and denyOut (egress) and allowPublicTraffic",
                           key);
            return false;
        }
    }
    json_t *allow = json_object_get(network, "allowOut");
    json_t *deny = json_object_get(network, "denyOut");
    json_t *public_traffic = json_object_get(network, "allowPublicTraffic");
    if (public_traffic && !json_is_null(public_traffic) && !json_is_boolean(public_traffic))
        return wrong(err, "network.allowPublicTraffic", "a boolean");
    if (allow && !json_is_null(allow) && !string_array(allow, RBX_EGRESS_ALLOW_MAX))
        return wrong(err, "network.allowOut",
                    "an array of at most 64 destinations (CIDRs, addresses, domain names)");
    if (deny && !json_is_null(deny) && !string_array(deny, RBX_EGRESS_ALLOW_MAX))
        return wrong(err, "network.denyOut",
                    "an array of at most 64 destinations");
    bool has_deny = json_is_array(deny) && json_array_size(deny);
    if (has_deny && !denies_all(deny))
        return refuse(err, "network.denyOut naming some destinations is not served by runbox: a "
                           "sandbox's egress is narrowed by an allow list only (denyOut "
                           "[\"0.0.0.0/0\"] with allowOut [...]); the operator's --egress-deny "
                           "applies to every sandbox");
    if (has_deny)
        s->egress_allow = json_is_array(allow) ? json_incref(allow) : json_array();
    s->network_settings = json_incref(network);
    return true;
}

/* The optional fields E2B's SDKs send that runbox does nothing with: a
 * true or non-empty value asks for what is not served. */
static bool unserved(json_t *body, http_error *err)
{
    static const char *const fields[] = {"mcp", "volumeMounts", "autoResume", "iam", NULL};
    for (const char *const *f = fields; *f; f++) {
        json_t *value = json_object_get(body, *f);
        bool asked = value && !json_is_null(value) && !json_is_false(value) &&
                     !(json_is_array(value) && !json_array_size(value)) &&
                     !(json_is_object(value) && (!json_object_size(value) ||
                                                 json_is_false(json_object_get(value, "enabled"))));
        if (asked) {
            http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                           "'%s' is not served by runbox: sandboxes here have no MCP gateway, "
                           "volumes, automatic resume or cloud identity",
                           *f);
            return false;
        }
    }
    return true;
}

bool e2b_create_timeout(json_t *body, int64_t *timeout_s, http_error *err)
{
    json_t *value = body ? json_object_get(body, "timeout") : NULL;
    *timeout_s = E2B_DEFAULT_TIMEOUT_S;
    if (!value || json_is_null(value))
        return true;
    if (!json_is_integer(value) || json_integer_value(value) < 0 ||
        json_integer_value(value) > E2B_MAX_TIMEOUT_S) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'timeout' must be a whole number of seconds from 0 to %d (a day)",
                       E2B_MAX_TIMEOUT_S);
        return false;
    }
    *timeout_s = json_integer_value(value);
    return true;
}

bool e2b_create_settings(http_server *server, json_t *body, e2b_sandbox *s, http_error *err)
{
    *s = (e2b_sandbox){.network = -1};
    json_t *template_id = json_object_get(body, "templateID");
    const char *name = json_string_value(template_id);
    if (!name || !*name || strlen(name) > E2B_TEMPLATE_MAX)
        return refuse(err, "'templateID' is required: a template's name of at most 128 bytes, "
                           "such as code-interpreter-v1");
    snprintf(s->template_id, sizeof s->template_id, "%s", name);
    json_t *internet = json_object_get(body, "allow_internet_access");
    json_t *auto_pause = json_object_get(body, "autoPause");
    json_t *metadata, *env_vars;
    int64_t timeout_s;
    if (internet && !json_is_null(internet) && !json_is_boolean(internet))
        return wrong(err, "allow_internet_access", "a boolean");
    if (auto_pause && !json_is_null(auto_pause) && !json_is_boolean(auto_pause))
        return wrong(err, "autoPause", "a boolean");
    if (!e2b_create_timeout(body, &timeout_s, err) ||
        !strings_field(body, "metadata", &metadata, err) ||
        !strings_field(body, "envVars", &env_vars, err) ||
        (metadata && !metadata_ok(metadata, err)) || (env_vars && !env_vars_ok(env_vars, err)) ||
        !unserved(body, err) ||
        !template_image(server, s->template_id, s->image, sizeof s->image, err))
        return false;
    if (json_is_boolean(internet))
        s->network = json_is_true(internet) ? 1 : 0;
    s->auto_pause = json_is_true(auto_pause);
    if (!network_settings(body, s, err)) {
        e2b_sandbox_release(s);
        return false;
    }
    s->metadata = metadata ? json_incref(metadata) : json_object();
    s->env_vars = env_vars ? json_incref(env_vars) : json_object();
    s->started_ms = e2b_now_ms();
    s->end_ms = s->started_ms + timeout_s * 1000;
    return true;
}
