/* A request's path as the server routes it: percent-decoded by
 * libmicrohttpd (with %00 kept from cutting it short, as server.c does),
 * refused with a control character, then matched against the route table
 * of runbox's API or of E2B's protocol, whose {id} and {path} go on to the
 * engine's session and file checks (or E2B's context lookup).
 * Routing needs no connection: a miss queues its 404 or 405 on a NULL one,
 * which libmicrohttpd declines, so the reply is built but never sent. */
#include "fuzz.h"

#include "http/http.h"
#include "runbox.h"
#include "sessions/files.h"

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};

/* The only paths served without the token: health probes, which say
 * nothing about sessions. */
/* What runbox serves without the token: the probes, and the playground's
 * page and its two files (they hold no data; the API they call needs it). */
static bool is_probe(const http_api *api, const char *path)
{
    if (api == &http_e2b_api)
        return !strcmp(path, "/health");
    return !strcmp(path, "/healthz") || !strcmp(path, "/livez") || !strcmp(path, "/") ||
           !strcmp(path, "/playground/app.js") || !strcmp(path, "/playground/app.css");
}

static bool has_control(const char *path)
{
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return true;
    return false;
}

/* The route's pattern with its {id} and {path} filled in must give back
 * the very path that was routed: nothing dropped, nothing invented. */
static void check_split(const http_request *req)
{
    char rebuilt[8192];
    size_t used = 0;
    for (const char *p = req->route->pattern; *p && used < sizeof rebuilt - 1;) {
        const char *part = NULL;
        if (!strncmp(p, "{id}", 4)) {
            part = req->session_id;
            p += 4;
        } else if (!strncmp(p, "{path}", 6)) {
            part = req->file_path;
            p += 6;
        }
        if (part)
            used += (size_t)snprintf(rebuilt + used, sizeof rebuilt - used, "%s", part);
        else
            rebuilt[used++] = *p++;
    }
    rebuilt[used < sizeof rebuilt ? used : sizeof rebuilt - 1] = 0;
    FUZZ_CHECK(!strcmp(rebuilt, req->path));
    FUZZ_CHECK(!req->session_id || (req->session_id[0] && !strchr(req->session_id, '/')));
    FUZZ_CHECK(!req->file_path || req->file_path[0]);
}

/* What the engine lets through of them cannot leave the session. */
static void check_engine_gates(const http_request *req)
{
    if (req->session_id && rbx_session_id_valid(req->session_id))
        FUZZ_CHECK(strcmp(req->session_id, ".") && strcmp(req->session_id, ".."));
    rbx_error err;
    if (!req->file_path || rbx_file_path_check(req->file_path, &err) != RBX_OK)
        return;
    FUZZ_CHECK(req->file_path[0] != '/');
    char *copy = strdup(req->file_path), *save = NULL;
    for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save))
        FUZZ_CHECK(strcmp(part, "..") && strcmp(part, "."));
    free(copy);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    json_object_seed(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    const char *method = methods[fuzz_byte(&in) % (sizeof methods / sizeof *methods)];
    const http_api *api = fuzz_byte(&in) & 1 ? &http_e2b_api : &http_runbox_api;
    char *url = fuzz_cstring(in.data, in.size);
    for (char *p = strstr(url, "%00"); p; p = strstr(p + 3, "%00"))
        p[2] = '1';
    url[MHD_http_unescape(url)] = 0;
    http_request req = {.path = url, .api = api};
    snprintf(req.method, sizeof req.method, "%s", method);
    if (!has_control(url)) {
        if (http_route_is_open(api, url))
            FUZZ_CHECK(is_probe(api, url));
        enum MHD_Result queued = MHD_YES;
        if (http_route(&req, &queued)) {
            FUZZ_CHECK(req.route &&
                       (!strcmp(req.route->method, method) ||
                        (!strcmp(method, "HEAD") && !strcmp(req.route->method, "GET"))));
            check_split(&req);
            check_engine_gates(&req);
        } else {
            FUZZ_CHECK(req.status == MHD_HTTP_NOT_FOUND ||
                       req.status == MHD_HTTP_METHOD_NOT_ALLOWED);
        }
    }
    free(req.session_id);
    free(req.file_path);
    free(url);
    return 0;
}
