/* An execute request as JSON (the body of HTTP's POST /v1/execute, a
 * message on the local socket) turned into an rbx_request: every field
 * checked for its type, unknown fields refused, so that the front end
 * answers before anything runs. */
#include "api/form.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *api_json_type_name(const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

json_t *api_json_of_text(char *text)
{
    json_t *value = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return value;
}

__attribute__((format(printf, 2, 3))) static bool invalid(form_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->no_memory = false;
    return false;
}

static bool wrong_type(form_error *err, const char *field, const char *expected,
                       const json_t *value)
{
    return invalid(err, "'%s' must be %s, not %s", field, expected, api_json_type_name(value));
}

static bool out_of_memory(form_error *err)
{
    snprintf(err->message, sizeof err->message, "out of memory");
    err->no_memory = true;
    return false;
}

/* A string that ends up as a C string may not hide a NUL. */
static bool c_string(const json_t *value, const char *field, const char **out, form_error *err)
{
    if (!json_is_string(value))
        return wrong_type(err, field, "a string", value);
    *out = json_string_value(value);
    if (strlen(*out) != json_string_length(value)) {
        invalid(err, "'%s' must not contain a NUL character", field);
        return false;
    }
    return true;
}

static bool parse_language(api_form *form, json_t *value, form_error *err)
{
    return c_string(value, "language", &form->request.language, err);
}

static bool parse_session_id(api_form *form, json_t *value, form_error *err)
{
    return c_string(value, "session_id", &form->request.session_id, err);
}

/* The engine judges the name (the store and the operator's allow-list). */
static bool parse_image(api_form *form, json_t *value, form_error *err)
{
    return c_string(value, "image", &form->request.image, err);
}

/* code and stdin are bytes, NUL included (the engine judges code). */
static bool parse_code(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_string(value))
        return wrong_type(err, "code", "a string", value);
    form->request.code = json_string_value(value);
    form->request.code_len = json_string_length(value);
    return true;
}

static bool parse_stdin(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_string(value))
        return wrong_type(err, "stdin", "a string", value);
    form->request.stdin_data = json_string_value(value);
    form->request.stdin_len = json_string_length(value);
    return true;
}

static bool parse_timeout(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_number(value))
        return wrong_type(err, "timeout", "a number of seconds", value);
    double seconds = json_number_value(value);
    /* 0 would mean "the default" to the engine: say so instead. */
    if (!isfinite(seconds) || seconds <= 0) {
        invalid(err, "'timeout' must be more than 0 seconds (leave it out for the default)");
        return false;
    }
    form->request.timeout_s = seconds;
    return true;
}

static bool parse_memory(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_integer(value))
        return wrong_type(err, "memory_mb", "a whole number of MiB", value);
    json_int_t mib = json_integer_value(value);
    if (mib <= 0 || mib > UINT32_MAX) {
        invalid(err, "'memory_mb' must be a positive number of MiB (leave it out for the "
                     "default)");
        return false;
    }
    form->request.memory_mb = (uint32_t)mib;
    return true;
}

static bool parse_cpus(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_number(value))
        return wrong_type(err, "cpus", "a number of cores", value);
    double cores = json_number_value(value);
    /* 0 would mean "the default" to the engine: say so instead. */
    if (!isfinite(cores) || cores <= 0) {
        invalid(err, "'cpus' must be more than 0 cores (leave it out for the default)");
        return false;
    }
    form->request.cpus = cores;
    return true;
}

static bool parse_network(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_boolean(value))
        return wrong_type(err, "network", "a boolean", value);
    form->request.network = json_is_true(value) ? 1 : 0;
    return true;
}

static bool parse_stream(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_boolean(value))
        return wrong_type(err, "stream", "a boolean", value);
    form->stream = json_is_true(value) ? 1 : 0;
    return true;
}

static bool parse_stateful(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_boolean(value))
        return wrong_type(err, "stateful", "a boolean", value);
    form->request.stateful = json_is_true(value);
    return true;
}

static bool parse_trace(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_boolean(value))
        return wrong_type(err, "trace", "a boolean", value);
    form->request.trace = json_is_true(value);
    return true;
}

static bool parse_requirements(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_array(value))
        return wrong_type(err, "requirements", "an array of strings", value);
    size_t count = json_array_size(value);
    form->requirements = calloc(count ? count : 1, sizeof *form->requirements);
    if (!form->requirements)
        return out_of_memory(err);
    for (size_t i = 0; i < count; i++) {
        char field[40];
        snprintf(field, sizeof field, "requirements[%zu]", i);
        if (!c_string(json_array_get(value, i), field, &form->requirements[i], err))
            return false;
    }
    form->request.requirements = form->requirements;
    form->request.requirement_count = count;
    return true;
}

/* Only the shape is checked here: which destinations are valid is the
 * engine's to say (its message starts with "egress_allow"). An empty array
 * is kept apart from a missing field: it means nothing is reachable. */
static bool parse_egress_allow(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_array(value))
        return wrong_type(err, "egress_allow",
                          "an array of destinations (CIDRs, addresses, domain names) as strings",
                          value);
    size_t count = json_array_size(value);
    if (count > RBX_EGRESS_ALLOW_MAX)
        return invalid(err, "'egress_allow' lists %zu destinations: at most %d are accepted", count,
                       RBX_EGRESS_ALLOW_MAX);
    form->egress_allow = calloc(count ? count : 1, sizeof *form->egress_allow);
    if (!form->egress_allow)
        return out_of_memory(err);
    for (size_t i = 0; i < count; i++) {
        char field[40];
        snprintf(field, sizeof field, "egress_allow[%zu]", i);
        if (!c_string(json_array_get(value, i), field, &form->egress_allow[i], err))
            return false;
    }
    form->request.egress_allow = form->egress_allow;
    form->request.egress_allow_count = count;
    return true;
}

/* {"NAME": "value"} becomes "NAME=value" entries; the engine checks names. */
static bool parse_env(api_form *form, json_t *value, form_error *err)
{
    if (!json_is_object(value))
        return wrong_type(err, "env", "an object of strings", value);
    form->env = calloc(json_object_size(value) + 1, sizeof *form->env);
    if (!form->env)
        return out_of_memory(err);
    form->request.env = (const char *const *)form->env;
    const char *name;
    json_t *item;
    json_object_foreach(value, name, item)
    {
        char field[300];
        const char *text;
        snprintf(field, sizeof field, "env.%.256s", name);
        if (!c_string(item, field, &text, err))
            return false;
        if (strchr(name, '=')) {
            invalid(err, "'%s' is not a variable name: names cannot contain '='", field);
            return false;
        }
        size_t len = strlen(name) + strlen(text) + 2;
        char *entry = malloc(len);
        if (!entry)
            return out_of_memory(err);
        snprintf(entry, len, "%s=%s", name, text);
        form->env[form->request.env_count++] = entry;
    }
    return true;
}

typedef bool (*field_parser)(api_form *form, json_t *value, form_error *err);

static const struct field {
    const char *name;
    field_parser parse;
} fields[] = {
    {"language", parse_language},
    {"code", parse_code},
    {"timeout", parse_timeout},
    {"session_id", parse_session_id},
    {"requirements", parse_requirements},
    {"memory_mb", parse_memory},
    {"cpus", parse_cpus},
    {"network", parse_network},
    {"env", parse_env},
    {"stdin", parse_stdin},
    {"stream", parse_stream},
    {"trace", parse_trace},
    {"stateful", parse_stateful},
    {"egress_allow", parse_egress_allow},
    {"image", parse_image},
};

bool api_form_parse(api_form *form, json_t *body, form_error *err)
{
    *form = (api_form){.body = body, .stream = -1};
    rbx_request_init(&form->request);
    const char *name;
    json_t *value;
    json_object_foreach(body, name, value)
    {
        const struct field *field = NULL;
        for (size_t i = 0; i < sizeof fields / sizeof *fields && !field; i++)
            if (!strcmp(fields[i].name, name))
                field = &fields[i];
        if (!field) {
            invalid(err,
                    "unknown field '%.100s' (accepted: language, code, timeout, "
                    "session_id, requirements, memory_mb, cpus, network, env, stdin, "
                    "stream, trace, stateful, egress_allow, image)",
                    name);
            return false;
        }
        /* null is the same as leaving the field out */
        if (!json_is_null(value) && !field->parse(form, value, err))
            return false;
    }
    return true;
}

void api_form_free(api_form *form)
{
    for (size_t i = 0; form->env && i < form->request.env_count; i++)
        free(form->env[i]);
    free(form->env);
    free(form->requirements);
    free(form->egress_allow);
    json_decref(form->body);
    form->env = NULL;
    form->requirements = NULL;
    form->egress_allow = NULL;
    form->body = NULL;
}
