/* envd's signed file URLs (http.h). E2B's SDK signs a file URL it hands
 * out (download_url, upload_url) with the sandbox's access token:
 * signature=v1_<unpadded base64 of SHA-256("<path>:<read|write>:<user>:
 * <token>[:<expiration>]")>, and signature_expiration=<unix seconds> when
 * asked for one. With E2B_SANDBOX_URL the URL names no sandbox (it is this
 * origin), so the sandbox is the one whose token makes the signature: one
 * hash per running sandbox, bounded by the sandboxes the server keeps. */
#include "http/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIGNATURE_PREFIX "v1_"
#define SIGNED_TEXT_MAX 8192

static const char *query(struct MHD_Connection *connection, const char *name)
{
    return MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, name);
}

bool e2b_signed_file_request(struct MHD_Connection *connection)
{
    return query(connection, "signature") != NULL;
}

/* The signature that token makes for the request; NULL when it cannot. */
static char *signature_of(const char *path, bool write, const char *user, const char *token,
                          const char *expiration)
{
    char text[SIGNED_TEXT_MAX];
    int n = snprintf(text, sizeof text, "%s:%s:%s:%s%s%s", path, write ? "write" : "read", user,
                     token, expiration ? ":" : "", expiration ? expiration : "");
    unsigned char digest[32];
    rbx_error err;
    if (n < 0 || (size_t)n >= sizeof text || rbx_sha256(text, (size_t)n, digest, &err) != RBX_OK)
        return NULL;
    char *encoded = api_base64_encode(digest, sizeof digest, false, NULL);
    char *signature = encoded ? malloc(strlen(SIGNATURE_PREFIX) + strlen(encoded) + 1) : NULL;
    if (signature)
        sprintf(signature, "%s%s", SIGNATURE_PREFIX, encoded);
    free(encoded);
    return signature;
}

static bool refuse(http_error *err, const char *why)
{
    http_error_set(err, MHD_HTTP_UNAUTHORIZED, "unauthenticated",
                   "the file URL's signature %s: ask the SDK for a new one (download_url, "
                   "upload_url)", why);
    return false;
}

bool e2b_sandbox_for_signed_file(http_server *server, struct MHD_Connection *connection,
                                 bool write, e2b_sandbox_view *view, http_error *err)
{
    const char *signature = query(connection, "signature");
    const char *path = query(connection, "path");
    const char *user = query(connection, "username");
    const char *expiration = query(connection, "signature_expiration");
    if (!signature || strncmp(signature, SIGNATURE_PREFIX, strlen(SIGNATURE_PREFIX)))
        return refuse(err, "is not one (v1_...)");
    if (!path)
        return refuse(err, "needs the path it signs (?path=)");
    if (expiration) {
        char *end;
        long long until = strtoll(expiration, &end, 10);
        if (*end || end == expiration || until < 0)
            return refuse(err, "has an expiration that is not a number of seconds");
        if (until * 1000 < e2b_now_ms())
            return refuse(err, "has expired");
    }
    size_t count = 0;
    e2b_sandbox *all = server->sandboxes ? e2b_sandboxes_all(server->sandboxes, &count) : NULL;
    const e2b_sandbox *found = NULL;
    for (size_t i = 0; i < count && !found; i++) {
        if (all[i].paused || all[i].end_ms <= e2b_now_ms())
            continue;
        char *expected =
            signature_of(path, write, user ? user : "", all[i].envd_token, expiration);
        if (expected && e2b_same_token(signature, expected))
            found = &all[i];
        free(expected);
    }
    bool ok = found ? e2b_sandbox_view_of(server, found, view, err)
                    : refuse(err, "is no running sandbox's");
    for (size_t i = 0; i < count; i++)
        e2b_sandbox_release(&all[i]);
    free(all);
    return ok;
}
