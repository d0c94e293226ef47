/* The web playground: GET / serves a page built from web/ (web/build.mjs,
 * when runbox-serve is built) and embedded in the binary, so the server
 * needs no files at run time and the page cannot drift from the server.
 * The page holds no data: it is served without the token, and everything
 * it shows comes from the API, which asks for the token. */
#include "http/http.h"

#include <string.h>

typedef struct asset {
    const char *path;
    const char *type;
    const char *bytes;
    const unsigned long *size;
} asset;

static const asset assets[] = {
    {"/", "text/html; charset=utf-8", http_page_html, &http_page_html_size},
    {"/playground/app.js", "text/javascript; charset=utf-8", http_page_js, &http_page_js_size},
    {"/playground/app.css", "text/css; charset=utf-8", http_page_css, &http_page_css_size},
};

/* The page's scripts come only from the server itself; what code printed
 * is shown as text by the page, and this policy stops any of it that got
 * through from running or calling out. HTML results go into sandboxed
 * frames (srcdoc), which inherit it. */
static const char policy[] =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; frame-src 'self' blob: data:; "
    "child-src 'self' blob: data:; font-src 'self'; form-action 'none'; base-uri 'none'; "
    "frame-ancestors 'none'";

enum MHD_Result http_handle_page(http_request *req)
{
    const asset *found = NULL;
    for (size_t i = 0; i < sizeof assets / sizeof *assets; i++)
        if (!strcmp(assets[i].path, req->path))
            found = &assets[i];
    if (!found)
        return http_reply_fail(req, MHD_HTTP_NOT_FOUND, "not_found", "no such page");
    size_t len = (size_t)*found->size;
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, (void *)found->bytes, MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, found->type);
    MHD_add_response_header(response, "Content-Security-Policy", policy);
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
    /* A new runbox-serve may serve a new page: browsers ask again. */
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return http_reply(req, MHD_HTTP_OK, response, len);
}
