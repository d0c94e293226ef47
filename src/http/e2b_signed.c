/* envd's signed file URLs (http.h). E2B's SDK signs a file URL it hands
 * out (download_url, upload_url) with the sandbox's access token:
 * signature=v1_<unpadded base64 of SHA-256("<path>:<read|write>:<user>:
 * <token>[:<expiration>]")>, and signature_expiration=<unix seconds> when
 * asked for one. The query names no sandbox: the SDK puts it in the host
 * (https://49983-<id>.<domain>/files?...), and there one signature is
 * computed. With E2B_SANDBOX_URL the host is this one origin for every
 * sandbox, so the sandbox is the one whose token makes the signature: a
 * search over the running sandboxes (at most E2B_SANDBOXES_MAX), which the
 * SDK's format leaves no way around. It costs one SHA-256 a sandbox and
 * nothing more: the text before the token is written once, the given
 * signature decoded once, and digests compared without allocating or
 * copying a sandbox. */
#include "http/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIGNATURE_PREFIX "v1_"
#define SIGNED_TEXT_MAX 8192
#define DIGEST_SIZE 32
/* A signature_expiration past this (the year 10000) is no time any SDK
 * writes: refused, and never multiplied into milliseconds that overflow. */
#define EXPIRATION_MAX_S 253402300800LL

/* What the candidates' signatures are compared with: the text they sign up
 * to the token, what follows it, and the digest the URL carries. */
typedef struct signed_url {
    char text[SIGNED_TEXT_MAX]; /* "<path>:<op>:<user>:", then each candidate's rest */
    size_t prefix_len;
    const char *expiration; /* NULL: none */
    unsigned char digest[DIGEST_SIZE];
} signed_url;

static const char *query(struct MHD_Connection *connection, const char *name)
{
    return MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, name);
}

bool e2b_signed_file_request(struct MHD_Connection *connection)
{
    return query(connection, "signature") != NULL;
}

/* The digest a v1_ signature carries, in the one spelling the SDK writes
 * (unpadded standard base64 of 32 bytes): no other text of it matches. */
static bool decode_signature(const char *signature, unsigned char digest[DIGEST_SIZE])
{
    const char *encoded = signature + strlen(SIGNATURE_PREFIX);
    char *bytes = NULL, *again = NULL;
    size_t len = 0;
    bool ok = api_base64_decode(encoded, strlen(encoded), &bytes, &len) && len == DIGEST_SIZE &&
              (again = api_base64_encode(bytes, len, false, NULL)) && !strcmp(again, encoded);
    if (ok)
        memcpy(digest, bytes, DIGEST_SIZE);
    free(bytes);
    free(again);
    return ok;
}

/* Whether token makes the URL's signature; in a time that does not depend
 * on how much of the digest matches. */
static bool signed_by(const e2b_sandbox *sandbox, void *context)
{
    signed_url *url = context;
    int n = snprintf(url->text + url->prefix_len, sizeof url->text - url->prefix_len, "%s%s%s",
                     sandbox->envd_token, url->expiration ? ":" : "",
                     url->expiration ? url->expiration : "");
    unsigned char digest[DIGEST_SIZE];
    rbx_error err;
    if (n < 0 || (size_t)n >= sizeof url->text - url->prefix_len ||
        rbx_sha256(url->text, url->prefix_len + (size_t)n, digest, &err) != RBX_OK)
        return false;
    volatile unsigned char diff = 0;
    for (size_t i = 0; i < DIGEST_SIZE; i++)
        diff |= digest[i] ^ url->digest[i];
    return diff == 0;
}

/* The sandbox the Host header names as the SDK writes it without
 * E2B_SANDBOX_URL: 49983-<id>.<domain>. */
static bool host_sandbox(struct MHD_Connection *connection, char id[E2B_SANDBOX_ID_MAX + 1])
{
    const char *host = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_HOST);
    const char *prefix = E2B_ENVD_PORT "-";
    if (!host || strncmp(host, prefix, strlen(prefix)))
        return false;
    host += strlen(prefix);
    size_t len = strcspn(host, ".");
    if (!len || len > E2B_SANDBOX_ID_MAX || host[len] != '.')
        return false;
    memcpy(id, host, len);
    id[len] = 0;
    return true;
}

/* The running sandbox whose token made the signature: the one the host
 * names, else the one found before (signer), else the search. */
static bool find_signer(http_server *server, struct MHD_Connection *connection, signed_url *url,
                        const char *signer, e2b_sandbox *found)
{
    if (!server->sandboxes)
        return false;
    int64_t now_ms = e2b_now_ms();
    char id[E2B_SANDBOX_ID_MAX + 1];
    if (!host_sandbox(connection, id) && !*signer)
        return e2b_sandboxes_find_running(server->sandboxes, now_ms, signed_by, url, found);
    if (!host_sandbox(connection, id))
        snprintf(id, sizeof id, "%s", signer);
    if (!e2b_sandboxes_get(server->sandboxes, id, found))
        return false;
    if (!found->paused && found->end_ms > now_ms && signed_by(found, url))
        return true;
    e2b_sandbox_release(found);
    return false;
}

static bool refuse(http_error *err, const char *why)
{
    http_error_set(err, MHD_HTTP_UNAUTHORIZED, "unauthenticated",
                   "the file URL's signature %s: ask the SDK for a new one (download_url, "
                   "upload_url)", why);
    return false;
}

_Static_assert(sizeof ((http_request *)0)->admitted > E2B_SANDBOX_ID_MAX,
               "http_request.admitted holds a sandbox's id");

bool e2b_sandbox_for_signed_file(http_server *server, struct MHD_Connection *connection,
                                 bool write, char signer[E2B_SANDBOX_ID_MAX + 1],
                                 e2b_sandbox_view *view, http_error *err)
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
        errno = 0;
        long long until = strtoll(expiration, &end, 10);
        if (*end || end == expiration || until < 0)
            return refuse(err, "has an expiration that is not a number of seconds");
        if (errno == ERANGE || until > EXPIRATION_MAX_S)
            return refuse(err, "has an expiration past the year 9999");
        if (until * 1000 < e2b_now_ms())
            return refuse(err, "has expired");
    }
    signed_url *url = malloc(sizeof *url);
    if (!url) {
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error", "out of memory");
        return false;
    }
    url->expiration = expiration;
    int n = snprintf(url->text, sizeof url->text, "%s:%s:%s:", path, write ? "write" : "read",
                     user ? user : "");
    url->prefix_len = n < 0 ? 0 : (size_t)n;
    e2b_sandbox found;
    bool signed_ok = n >= 0 && (size_t)n < sizeof url->text &&
                     decode_signature(signature, url->digest) &&
                     find_signer(server, connection, url, signer, &found);
    free(url);
    if (!signed_ok)
        return refuse(err, "is no running sandbox's");
    snprintf(signer, E2B_SANDBOX_ID_MAX + 1, "%s", found.id);
    return e2b_sandbox_found(server, &found, view, err);
}
