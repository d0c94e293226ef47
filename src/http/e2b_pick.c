/* Which of E2B's three APIs a request on the E2B listener is for (http.h):
 * the SDKs send the control plane to E2B_API_URL and everything of a
 * sandbox to E2B_SANDBOX_URL, and both may name this one origin. */
#include "http/http.h"

#include <string.h>

static bool is_control_path(const char *path)
{
    static const char *const prefixes[] = {"/sandboxes", "/v2/sandboxes"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        size_t n = strlen(prefixes[i]);
        if (!strncmp(path, prefixes[i], n) && (path[n] == 0 || path[n] == '/' || path[n] == '?'))
            return true;
    }
    return false;
}

const http_api *http_e2b_api_pick(struct MHD_Connection *connection, const char *path)
{
    const char *port =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "E2b-Sandbox-Port");
    if (port && !strcmp(port, E2B_ENVD_PORT))
        return &http_e2b_envd_api;
    if (!port && is_control_path(path))
        return &http_e2b_control_api;
    /* A signed file URL (the SDK's download_url, upload_url) comes with no
     * header of E2B's: a browser or curl fetches it. */
    if (!port && !strcmp(path, "/files") && e2b_signed_file_request(connection))
        return &http_e2b_envd_api;
    return &http_e2b_api;
}
