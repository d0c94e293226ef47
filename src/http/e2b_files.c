/* envd's GET and POST /files (E2B-SANDBOX-PROTOCOL.md section 3): a file's
 * bytes out, gzip'ed when the client asks; files in as multipart parts
 * named "file" whose filename is the destination path (parsed by
 * libmicrohttpd's post processor, which passes such filenames through as
 * they are), or as one octet-stream body (gzip'ed or not) for ?path=.
 * Uploads are bounded by the server's --max-body (413), downloads by its
 * --max-download. */
#include "http/e2b_envd.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>

#define PARTS_MAX 1000
#define GZIP_WINDOW (15 + 16) /* zlib: a gzip header and trailer, not zlib's */
#define READ_CHUNK (64 * 1024)

/* --- GET /files ---------------------------------------------------------------------- */

/* Whether Accept-Encoding names gzip with a weight above zero. */
static bool wants_gzip(struct MHD_Connection *connection)
{
    const char *accept =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    for (const char *p = accept; p && *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t token = strcspn(p, " \t;,");
        if (token == 4 && !strncasecmp(p, "gzip", 4)) {
            const char *q = memchr(p, ';', n);
            const char *weight = q ? strstr(q, "q=") : NULL;
            return !weight || weight >= p + n || strtod(weight + 2, NULL) > 0;
        }
        p += n;
    }
    return false;
}

typedef struct gzip_reader {
    int fd;
    uint64_t left; /* the file's size when it was opened: no more is sent */
    uint64_t *bytes_sent; /* the request's count, for the access log */
    z_stream z;
    bool in_done, finished;
    unsigned char in[READ_CHUNK];
} gzip_reader;

/* MHD's content reader: the file deflated as it is read. */
static ssize_t read_gzip(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    gzip_reader *r = cls;
    if (r->finished)
        return MHD_CONTENT_READER_END_OF_STREAM;
    uInt room = (uInt)(max > 1u << 30 ? 1u << 30 : max);
    r->z.next_out = (unsigned char *)buf;
    r->z.avail_out = room;
    while (r->z.avail_out == room) { /* until something is made, or the end */
        if (r->z.avail_in == 0 && !r->in_done) {
            size_t want = r->left < sizeof r->in ? (size_t)r->left : sizeof r->in;
            ssize_t n = read(r->fd, r->in, want);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            r->left -= (uint64_t)n;
            r->in_done = n == 0 || r->left == 0; /* shrunk meanwhile, or all of it */
            r->z.next_in = r->in;
            r->z.avail_in = (uInt)n;
        }
        int rc = deflate(&r->z, r->in_done ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            r->finished = true;
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t made = room - r->z.avail_out;
    *r->bytes_sent += made;
    return made ? (ssize_t)made : MHD_CONTENT_READER_END_OF_STREAM;
}

static void free_gzip(void *cls)
{
    gzip_reader *r = cls;
    deflateEnd(&r->z);
    close(r->fd);
    free(r);
}

static struct MHD_Response *gzip_response(int fd, uint64_t size, uint64_t *bytes_sent)
{
    gzip_reader *r = calloc(1, sizeof *r);
    if (!r || deflateInit2(&r->z, 1, Z_DEFLATED, GZIP_WINDOW, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(r);
        return NULL;
    }
    r->fd = fd;
    r->left = size;
    r->bytes_sent = bytes_sent;
    r->in_done = size == 0;
    struct MHD_Response *response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, READ_CHUNK, read_gzip, r, free_gzip);
    if (!response) {
        deflateEnd(&r->z);
        free(r);
        return NULL;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    return response;
}

bool e2b_files_signed(const http_request *req)
{
    return !strcmp(req->path, "/files") && !e2b_request_sandbox_id(req->connection) &&
           e2b_signed_file_request(req->connection);
}

/* The sandbox of a /files request: named by its headers, or by a signed
 * URL's signature (e2b_signed.c) when they name none. */
static bool files_sandbox(http_request *req, bool write, e2b_sandbox_view *view, http_error *err)
{
    if (e2b_files_signed(req))
        return e2b_sandbox_for_signed_file(req->server, req->connection, write, req->admitted,
                                              view, err);
    return e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, view, err);
}

enum MHD_Result e2b_handle_files_get(http_request *req)
{
    e2b_sandbox_view view;
    http_error err;
    if (!files_sandbox(req, false, &view, &err))
        return http_reply_error(req, &err);
    char rel[1100];
    const char *path = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "path");
    if (!path)
        http_error_set(&err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "the path query parameter is required");
    bool ok = path && e2b_envd_user(req->connection, true, &err) &&
              e2b_envd_path(path, rel, sizeof rel, &err);
    if (ok && !rel[0]) {
        http_error_set(&err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "%s is a directory, not a file", E2B_DEFAULT_CWD);
        ok = false;
    }
    int fd = -1;
    uint64_t size = 0;
    rbx_error engine_err = {0};
    if (ok && rbx_file_open_read(req->server->engine, view.session_id, rel,
                                 req->server->options.max_download, &fd, &size,
                                 &engine_err) != RBX_OK) {
        e2b_envd_engine_error(&err, &engine_err);
        ok = false;
    }
    e2b_sandbox_view_release(&view);
    if (!ok)
        return http_reply_error(req, &err);
    bool gzip = wants_gzip(req->connection);
    /* The response closes fd. The sandbox may shrink or grow the file while
     * it is sent: both readers stop at the size it had here, or earlier. */
    struct MHD_Response *response = gzip ? gzip_response(fd, size, &req->bytes_sent)
                                         : http_file_response(fd, size, &req->bytes_sent);
    if (!response) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    return http_reply(req, MHD_HTTP_OK, response, 0); /* the readers count what they send */
}

/* --- POST /files --------------------------------------------------------------------- */

typedef struct upload_part {
    char *destination; /* as the client named it */
    char rel[1100];    /* its session path */
    char *data;
    size_t len, cap;
} upload_part;

typedef struct upload {
    upload_part *parts;
    size_t count, cap;
    http_error err;
    bool failed;
} upload;

static void upload_free(upload *u)
{
    for (size_t i = 0; i < u->count; i++) {
        free(u->parts[i].destination);
        free(u->parts[i].data);
    }
    free(u->parts);
}

/* Records why the upload is refused (the first reason stays); false. */
static bool refuse(upload *u, unsigned status, const char *message)
{
    if (!u->failed)
        http_error_set(&u->err, status, "invalid_argument", "%s", message);
    u->failed = true;
    return false;
}

static upload_part *new_part(upload *u, const char *destination)
{
    if (u->count == PARTS_MAX)
        return NULL;
    if (u->count == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 4;
        upload_part *grown = realloc(u->parts, cap * sizeof *grown);
        if (!grown)
            return NULL;
        u->parts = grown;
        u->cap = cap;
    }
    upload_part *p = &u->parts[u->count];
    *p = (upload_part){.destination = strdup(destination)};
    if (!p->destination)
        return NULL;
    u->count++;
    return p;
}

/* libmicrohttpd's post processor hands each part over in pieces; a piece
 * at offset 0 starts a part (two empty parts of one name in a row become
 * one, which writes the same). */
static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *content_type,
                               const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size)
{
    (void)kind;
    (void)content_type;
    (void)transfer_encoding;
    upload *u = cls;
    if (strcmp(key, "file")) {
        refuse(u, MHD_HTTP_BAD_REQUEST, "only parts named 'file' are taken, each a file to write");
        return MHD_NO;
    }
    if (!filename || !*filename) {
        refuse(u, MHD_HTTP_BAD_REQUEST,
               "a part named 'file' needs a filename: the path to write it to");
        return MHD_NO;
    }
    upload_part *p = u->count ? &u->parts[u->count - 1] : NULL;
    if (off == 0 && (!p || p->len > 0 || strcmp(p->destination, filename)))
        p = new_part(u, filename);
    if (!p) {
        refuse(u, MHD_HTTP_CONTENT_TOO_LARGE, "more than 1000 files in one upload");
        return MHD_NO;
    }
    if (p->len + size > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + size)
            cap *= 2;
        char *grown = realloc(p->data, cap);
        if (!grown) {
            refuse(u, MHD_HTTP_CONTENT_TOO_LARGE, "out of memory for the upload");
            return MHD_NO;
        }
        p->data = grown;
        p->cap = cap;
    }
    if (size)
        memcpy(p->data + p->len, data, size);
    p->len += size;
    return MHD_YES;
}

static bool parse_multipart(http_request *req, const char *body, size_t len, upload *u)
{
    struct MHD_PostProcessor *pp =
        MHD_create_post_processor(req->connection, 64 * 1024, on_part, u);
    if (!pp) {
        refuse(u, MHD_HTTP_BAD_REQUEST,
               "a multipart body needs 'Content-Type: multipart/form-data; boundary=...'");
        return false;
    }
    bool parsed = MHD_post_process(pp, body, len) == MHD_YES;
    /* MHD_NO from destroy: the body ended before its closing boundary. */
    bool complete = MHD_destroy_post_processor(pp) == MHD_YES;
    if (!u->failed && (!parsed || !complete))
        refuse(u, MHD_HTTP_BAD_REQUEST,
                    "the multipart body is malformed or cut short (no closing boundary)");
    if (!u->failed && u->count == 0)
        refuse(u, MHD_HTTP_BAD_REQUEST, "the multipart body holds no part named 'file'");
    return !u->failed;
}

/* Content-Encoding: gzip, inflated up to the body limit. */
static bool gunzip(const http_body *body, size_t limit, char **out, size_t *out_len,
                   http_error *err)
{
    z_stream z = {0};
    if (inflateInit2(&z, GZIP_WINDOW) != Z_OK) {
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "cannot inflate");
        return false;
    }
    size_t cap = 64 * 1024, len = 0;
    char *buf = malloc(cap);
    z.next_in = (unsigned char *)body->data;
    z.avail_in = (uInt)body->len;
    int rc = Z_OK;
    while (buf && rc == Z_OK) {
        if (len == cap) {
            if (cap > limit) {
                free(buf);
                inflateEnd(&z);
                http_error_set(err, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                               "the upload inflates past the limit of %zu bytes", limit);
                return false;
            }
            char *grown = realloc(buf, cap * 2);
            if (!grown)
                break;
            buf = grown;
            cap *= 2;
        }
        z.next_out = (unsigned char *)buf + len;
        z.avail_out = (uInt)(cap - len);
        rc = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END || len > limit) {
        free(buf);
        if (len > limit)
            http_error_set(err, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                           "the upload inflates past the limit of %zu bytes", limit);
        else
            http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                           "the body is not valid gzip (Content-Encoding: gzip)");
        return false;
    }
    *out = buf;
    *out_len = len;
    return true;
}

typedef struct metadata {
    size_t count;
    bool too_many;
    char keys[RBX_FILE_META_MAX][RBX_FILE_META_KEY_MAX + 1];
    const char *key_of[RBX_FILE_META_MAX], *values[RBX_FILE_META_MAX];
} metadata;

/* X-Metadata-<key>: <value>, keys lowercased as envd keeps them. */
static enum MHD_Result on_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    metadata *m = cls;
    static const char prefix[] = "X-Metadata-";
    if (strncasecmp(key, prefix, sizeof prefix - 1))
        return MHD_YES;
    const char *name = key + sizeof prefix - 1;
    if (m->count == RBX_FILE_META_MAX || strlen(name) > RBX_FILE_META_KEY_MAX) {
        m->too_many = true;
        return MHD_YES;
    }
    size_t i = m->count++;
    for (size_t c = 0; (m->keys[i][c] = (char)tolower((unsigned char)name[c])); c++)
        ;
    m->key_of[i] = m->keys[i];
    m->values[i] = value ? value : "";
    return MHD_YES;
}

static json_t *written(const upload_part *p, const metadata *m)
{
    char shown[sizeof p->rel + sizeof E2B_DEFAULT_CWD + 1];
    e2b_envd_shown_path(p->rel, shown, sizeof shown);
    const char *name = strrchr(shown, '/') + 1;
    json_t *info = json_pack("{s:o, s:s, s:o}", "name", http_json_text(name, strlen(name)),
                             "type", "file", "path", http_json_text(shown, strlen(shown)));
    if (m->count) {
        json_t *meta = json_object();
        for (size_t i = 0; i < m->count; i++)
            json_object_set_new(meta, m->key_of[i],
                                http_json_text(m->values[i], strlen(m->values[i])));
        json_object_set_new(info, "metadata", meta);
    }
    return info;
}

static bool type_is(const char *type, const char *wanted)
{
    size_t n = strlen(wanted);
    return type && !strncasecmp(type, wanted, n) &&
           (type[n] == 0 || type[n] == ';' || type[n] == ' ');
}

/* The parts to write, their paths resolved; false with u->err. */
static bool collect(http_request *req, const char *body, size_t len, upload *u)
{
    struct MHD_Connection *c = req->connection;
    const char *type =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");
    if (type_is(type, "multipart/form-data")) {
        if (!parse_multipart(req, body, len, u))
            return false;
        if (path && u->count != 1)
            return refuse(u, MHD_HTTP_BAD_REQUEST,
                          "the path query names one file: send one part, or leave it out "
                          "and name each part's path in its filename");
    } else if (type_is(type, "application/octet-stream")) {
        if (!path)
            return refuse(u, MHD_HTTP_BAD_REQUEST,
                          "an octet-stream upload needs the path query parameter");
        upload_part *p = new_part(u, path);
        if (!p || (len && !(p->data = malloc(len))))
            return refuse(u, MHD_HTTP_CONTENT_TOO_LARGE, "out of memory for the upload");
        if (len)
            memcpy(p->data, body, len);
        p->len = len;
    } else {
        return refuse(u, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                      "send the files as multipart/form-data (parts named 'file') or one "
                      "as application/octet-stream with ?path=");
    }
    for (size_t i = 0; i < u->count; i++) {
        /* With ?path= and one part, the query names the destination. */
        const char *destination = path ? path : u->parts[i].destination;
        if (!e2b_envd_path(destination, u->parts[i].rel, sizeof u->parts[i].rel, &u->err)) {
            u->failed = true;
            return false;
        }
        if (!u->parts[i].rel[0])
            return refuse(u, MHD_HTTP_BAD_REQUEST,
                          E2B_DEFAULT_CWD " is a directory: name a file to write");
    }
    return true;
}

enum MHD_Result e2b_handle_files_post(http_request *req)
{
    e2b_sandbox_view view;
    http_error err;
    if (!files_sandbox(req, true, &view, &err))
        return http_reply_error(req, &err);
    if (!e2b_envd_user(req->connection, true, &err)) {
        e2b_sandbox_view_release(&view);
        return http_reply_error(req, &err);
    }
    const char *encoding = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_CONTENT_ENCODING);
    char *inflated = NULL;
    const char *body = req->body.data;
    size_t len = req->body.len;
    if (encoding && !strcasecmp(encoding, "gzip")) {
        if (!gunzip(&req->body, req->body.limit, &inflated, &len, &err)) {
            e2b_sandbox_view_release(&view);
            return http_reply_error(req, &err);
        }
        body = inflated;
    } else if (encoding && strcasecmp(encoding, "identity")) {
        e2b_sandbox_view_release(&view);
        return http_reply_fail(req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "invalid_argument",
                               "Content-Encoding %.40s is not taken: send gzip or identity",
                               encoding);
    }
    upload u = {0};
    metadata meta = {0};
    MHD_get_connection_values(req->connection, MHD_HEADER_KIND, on_header, &meta);
    bool ok = collect(req, body ? body : "", len, &u);
    if (!ok)
        err = u.err;
    else if (meta.too_many) {
        http_error_set(&err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "at most %d metadata headers of keys up to %d characters",
                       RBX_FILE_META_MAX, RBX_FILE_META_KEY_MAX);
        ok = false;
    }
    json_t *answer = json_array();
    for (size_t i = 0; ok && i < u.count; i++) {
        rbx_error engine_err = {0};
        if (rbx_file_put_meta(req->server->engine, view.session_id, u.parts[i].rel,
                              u.parts[i].data, u.parts[i].len, meta.key_of, meta.values,
                              meta.count, &engine_err) != RBX_OK) {
            e2b_envd_engine_error(&err, &engine_err);
            ok = false;
        } else {
            json_array_append_new(answer, written(&u.parts[i], &meta));
        }
    }
    upload_free(&u);
    free(inflated);
    e2b_sandbox_view_release(&view);
    if (!ok) {
        json_decref(answer);
        return http_reply_error(req, &err);
    }
    return http_reply_json(req, MHD_HTTP_OK, answer, NULL, NULL);
}
