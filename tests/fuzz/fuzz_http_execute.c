/* POST /v1/execute as the server reads it: the body's JSON (nesting bounded
 * before jansson sees it), the form that turns it into an rbx_request, and
 * the engine's validation of that request and of its requirements, all of
 * which run before anything is spawned. */
#include "fuzz.h"

#include "engine/engine.h"
#include "envs/deps.h"
#include "http/http.h"

#include <math.h>

static rbx_engine engine; /* validation reads only the configuration */

/* What the form promises the engine about a request it accepted. */
static void check_form(const api_form *form, const json_t *body)
{
    const rbx_request *r = &form->request;
    json_t *code = json_object_get(body, "code");
    if (r->code)
        FUZZ_CHECK(r->code_len == json_string_length(code));
    if (r->language)
        FUZZ_CHECK(strlen(r->language) == json_string_length(json_object_get(body, "language")));
    if (r->session_id)
        FUZZ_CHECK(strlen(r->session_id) ==
                   json_string_length(json_object_get(body, "session_id")));
    if (r->timeout_s != 0)
        FUZZ_CHECK(isfinite(r->timeout_s) && r->timeout_s > 0);
    FUZZ_CHECK(form->stream >= -1 && form->stream <= 1);
    FUZZ_CHECK(r->network >= -1 && r->network <= 1);
    json_t *env = json_object_get(body, "env");
    FUZZ_CHECK(r->env_count == (json_is_object(env) ? json_object_size(env) : 0));
    for (size_t i = 0; i < r->env_count; i++) {
        const char *eq = strchr(r->env[i], '=');
        FUZZ_CHECK(eq && json_object_getn(env, r->env[i], (size_t)(eq - r->env[i])));
    }
    json_t *requirements = json_object_get(body, "requirements");
    FUZZ_CHECK(r->requirement_count == json_array_size(requirements));
    for (size_t i = 0; i < r->requirement_count; i++) /* no NUL cut a spec short */
        FUZZ_CHECK(strlen(r->requirements[i]) ==
                   json_string_length(json_array_get(requirements, i)));
    /* egress_allow: left out or null keeps the operator's policy, [] is a list of none. */
    json_t *egress = json_object_get(body, "egress_allow");
    FUZZ_CHECK(!r->egress_allow == !json_is_array(egress));
    FUZZ_CHECK(r->egress_allow_count == json_array_size(egress));
    FUZZ_CHECK(r->egress_allow_count <= RBX_EGRESS_ALLOW_MAX);
    for (size_t i = 0; i < r->egress_allow_count; i++)
        FUZZ_CHECK(strlen(r->egress_allow[i]) == json_string_length(json_array_get(egress, i)));
}

/* What the engine promises before it touches the disk. */
static void check_valid(const rbx_request *r, const rbx_runtime *runtime, double timeout_s)
{
    FUZZ_CHECK(runtime && rbx_runtime_canonical(r->language) == runtime->name);
    FUZZ_CHECK(timeout_s > 0 && timeout_s <= engine.config.max_timeout_s);
    FUZZ_CHECK(r->code && r->code_len <= engine.config.max_code_bytes);
    FUZZ_CHECK(!r->session_id || rbx_session_id_valid(r->session_id));
    for (size_t i = 0; i < r->env_count; i++) {
        size_t name_len = strcspn(r->env[i], "=");
        FUZZ_CHECK(rbx_env_name_valid(r->env[i], name_len));
        static const char *const reserved[] = {"HOME", "PWD", "OLDPWD", "USER", "LOGNAME"};
        for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++)
            FUZZ_CHECK(strlen(reserved[k]) != name_len ||
                       strncmp(r->env[i], reserved[k], name_len));
    }
}

static void check_requirements(const rbx_request *r, const rbx_runtime *runtime)
{
    rbx_requirements reqs;
    rbx_error err = {0};
    if (rbx_requirements_parse(&engine, runtime, r, &reqs, &err) != RBX_OK) {
        FUZZ_CHECK(err.message[0]);
        return;
    }
    FUZZ_CHECK(reqs.count == r->requirement_count);
    for (size_t i = 0; i < reqs.count; i++) {
        FUZZ_CHECK(reqs.specs[i][0] && reqs.specs[i][0] != '-'); /* never an installer option */
        FUZZ_CHECK(strlen(reqs.specs[i]) <= RBX_SPEC_MAX);
        FUZZ_CHECK(i == 0 || strcmp(reqs.specs[i - 1], reqs.specs[i]) <= 0);
    }
    rbx_requirements_free(&reqs);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    json_object_seed(1);
    rbx_config_defaults(&engine.config);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    http_error err = {0};
    json_t *body = http_json_parse((const char *)data, size, &err);
    if (!body) {
        FUZZ_CHECK(err.status == MHD_HTTP_BAD_REQUEST && !strcmp(err.code, "invalid_json"));
        return 0;
    }
    FUZZ_CHECK(json_is_object(body));
    api_form form;
    form_error why;
    if (!api_form_parse(&form, body, &why)) {
        FUZZ_CHECK(!why.no_memory && why.message[0]);
        api_form_free(&form);
        return 0;
    }
    check_form(&form, body);
    const rbx_runtime *runtime;
    double timeout_s;
    rbx_error engine_err = {0};
    if (rbx_request_validate(&engine, &form.request, &runtime, &timeout_s, &engine_err) == RBX_OK) {
        check_valid(&form.request, runtime, timeout_s);
        check_requirements(&form.request, runtime);
    } else {
        FUZZ_CHECK(engine_err.status == RBX_EINVAL && engine_err.message[0]);
    }
    api_form_free(&form);
    return 0;
}
