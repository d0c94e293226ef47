/* The sandbox's filesystem as envd shows it (e2b_envd.h): E2B's paths and
 * users turned into session paths, and the engine's entries turned into
 * envd's EntryInfo. */
#include "api/base64.h"
#include "http/e2b_envd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define HOME E2B_DEFAULT_CWD

/* Cleans an absolute path by its text: empty and "." components go, ".."
 * removes the one before it (never climbing above "/"). */
static void clean(const char *path, char *out, size_t size)
{
    size_t len = 0;
    out[0] = 0;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (len > 0 && out[len - 1] != '/')
                len--;
            if (len > 0)
                len--; /* the slash before it */
            out[len] = 0;
        } else if (n > 0 && !(n == 1 && p[0] == '.') && len + 1 + n < size) {
            out[len++] = '/';
            memcpy(out + len, p, n);
            len += n;
            out[len] = 0;
        }
        p += n + (p[n] == '/');
    }
    if (!len)
        snprintf(out, size, "/");
}

bool e2b_envd_path(const char *given, char *rel, size_t size, http_error *err)
{
    size_t len = given ? strlen(given) : 0;
    if (len > E2B_PATH_MAX) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "the path is longer than %d bytes", E2B_PATH_MAX);
        return false;
    }
    char joined[E2B_PATH_MAX + sizeof HOME + 2], cleaned[sizeof joined];
    if (len == 0 || !strcmp(given, "~"))
        snprintf(joined, sizeof joined, "%s", HOME);
    else if (!strncmp(given, "~/", 2))
        snprintf(joined, sizeof joined, "%s/%s", HOME, given + 2);
    else if (given[0] == '/')
        snprintf(joined, sizeof joined, "%s", given);
    else /* relative: against the user's home, /home/user for both users */
        snprintf(joined, sizeof joined, "%s/%s", HOME, given);
    clean(joined, cleaned, sizeof cleaned);
    size_t home = strlen(HOME);
    if (strncmp(cleaned, HOME, home) || (cleaned[home] && cleaned[home] != '/')) {
        http_error_set(err, MHD_HTTP_FORBIDDEN, "permission_denied",
                       "%.300s is outside %s: runbox serves the sandbox's files there only "
                       "(its session directory)",
                       cleaned, HOME);
        return false;
    }
    const char *rest = cleaned[home] ? cleaned + home + 1 : "";
    if (strlen(rest) >= size) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "the path is longer than %zu bytes", size - 1);
        return false;
    }
    snprintf(rel, size, "%s", rest);
    return true;
}

bool e2b_envd_path_field(json_t *body, const char *field, char *rel, size_t size,
                         http_error *err)
{
    json_t *value = json_object_get(body, field);
    if (value && !json_is_string(value)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument", "'%s' must be a string",
                       field);
        return false;
    }
    const char *text = value ? json_string_value(value) : "";
    /* A NUL inside the JSON string would cut the path short unseen. */
    if (value && strlen(text) != json_string_length(value)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument", "'%s' contains a NUL",
                       field);
        return false;
    }
    return e2b_envd_path(text, rel, size, err);
}

static bool known_user(const char *name, size_t len, http_error *err)
{
    if ((len == 4 && !strncmp(name, "user", 4)) || (len == 4 && !strncmp(name, "root", 4)))
        return true;
    http_error_set(err, MHD_HTTP_UNAUTHORIZED, "unauthenticated",
                   "unknown user '%.*s': this sandbox has 'user' and 'root'",
                   (int)(len > 64 ? 64 : len), name);
    return false;
}

bool e2b_envd_user(struct MHD_Connection *connection, bool from_query, http_error *err)
{
    if (from_query) {
        const char *name =
            MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "username");
        return !name || !*name || known_user(name, strlen(name), err);
    }
    const char *auth =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth)
        return true;
    if (strncasecmp(auth, "Basic ", 6) || strlen(auth + 6) > 200) {
        http_error_set(err, MHD_HTTP_UNAUTHORIZED, "unauthenticated",
                       "the Authorization header must be Basic base64(\"<user>:\")");
        return false;
    }
    char *decoded;
    size_t got;
    if (!api_base64_decode(auth + 6, strlen(auth + 6), &decoded, &got)) {
        http_error_set(err, MHD_HTTP_UNAUTHORIZED, "unauthenticated",
                       "the Authorization header is not valid base64");
        return false;
    }
    const char *colon = memchr(decoded, ':', got);
    bool known = known_user(decoded, colon ? (size_t)(colon - decoded) : got, err);
    free(decoded);
    return known;
}

void e2b_envd_shown_path(const char *rel, char *out, size_t size)
{
    snprintf(out, size, "%s%s%s", HOME, rel[0] ? "/" : "", rel);
}

static const char *file_type(char type)
{
    switch (type) {
    case 'f': return "FILE_TYPE_FILE";
    case 'd': return "FILE_TYPE_DIRECTORY";
    case 'l': return "FILE_TYPE_SYMLINK";
    default: return "FILE_TYPE_UNSPECIFIED"; /* FIFOs, sockets: the SDKs leave them out */
    }
}

/* As Go's FileMode.String() writes it, which envd sends. */
static void permissions(uint32_t mode, char out[11])
{
    out[0] = S_ISDIR(mode)    ? 'd'
             : S_ISLNK(mode)  ? 'L'
             : S_ISFIFO(mode) ? 'p'
             : S_ISSOCK(mode) ? 'S'
             : S_ISCHR(mode)  ? 'c'
             : S_ISBLK(mode)  ? 'D'
                              : '-';
    static const char rwx[] = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
    out[10] = 0;
}

static json_t *id_name(int64_t id)
{
    if (id == 0)
        return json_string("root");
    if (id == 1000) /* the sandbox's user (RBX_SANDBOX_UID) */
        return json_string("user");
    char number[24];
    snprintf(number, sizeof number, "%lld", (long long)id);
    return json_string(number);
}

/* A link's target as a path of the sandbox, by its text alone: the link
 * is described, never followed. */
static json_t *link_target(const char *shown, const char *target)
{
    char joined[2 * E2B_PATH_MAX + 4], cleaned[sizeof joined];
    if (target[0] == '/') {
        snprintf(joined, sizeof joined, "%s", target);
    } else {
        const char *slash = strrchr(shown, '/');
        snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - shown), shown, target);
    }
    clean(joined, cleaned, sizeof cleaned);
    return http_json_text(cleaned, strlen(cleaned));
}

json_t *e2b_envd_entry_json(const rbx_file_entry *e)
{
    char shown[sizeof e->path + sizeof HOME + 1];
    e2b_envd_shown_path(e->path, shown, sizeof shown);
    const char *name = strrchr(shown, '/') + 1;
    char perms[11], size[24], modified[64];
    permissions(e->mode, perms);
    snprintf(size, sizeof size, "%llu", (unsigned long long)e->size);
    struct tm tm;
    time_t seconds = (time_t)e->modified_s;
    gmtime_r(&seconds, &tm);
    size_t n = strftime(modified, sizeof modified, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(modified + n, sizeof modified - n, ".%09ldZ", e->modified_ns);
    json_t *entry = json_pack("{s:o, s:s, s:o, s:s, s:i, s:s, s:o, s:o, s:s}", "name",
                              http_json_text(name, strlen(name)), "type", file_type(e->type),
                              "path", http_json_text(shown, strlen(shown)), "size", size, "mode",
                              (int)(e->mode & 0777), "permissions", perms, "owner",
                              id_name(e->uid), "group", id_name(e->gid), "modifiedTime", modified);
    if (e->type == 'l') {
        json_object_set_new(entry, "isSymlink", json_true());
        if (e->link_target)
            json_object_set_new(entry, "symlinkTarget", link_target(shown, e->link_target));
    }
    if (e->meta_count) {
        json_t *meta = json_object();
        for (size_t i = 0; i < e->meta_count; i++)
            json_object_set_new(meta, e->meta_keys[i],
                                http_json_text(e->meta_values[i], strlen(e->meta_values[i])));
        json_object_set_new(entry, "metadata", meta);
    }
    return entry;
}

void e2b_envd_engine_error(http_error *err, const rbx_error *engine_err)
{
    /* The status is what counts: e2b_envd.c's error body names Connect's
     * code from it (404 not_found, 400 invalid_argument, 507...). */
    http_error_from_engine(err, engine_err);
}
