/* Session files: upload, download, list, delete. The path arrives already
 * percent-decoded (so %2e%2e%2f is "../" here) and the engine's rbx_file_*
 * resolve it beneath the session with openat2: "..", absolute paths and
 * links planted by sandboxed code are refused by the kernel. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>

enum MHD_Result http_handle_file_put(http_request *req)
{
    /* The body cap (413 past it) is the upload cap. */
    rbx_error err = {0};
    if (rbx_file_put(req->server->engine, req->session_id, req->file_path, req->body.data,
                     req->body.len, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    return http_reply_json(req, MHD_HTTP_OK,
                           json_pack("{s:s, s:o, s:I}", "session_id", req->session_id, "path",
                                     http_json_text(req->file_path, strlen(req->file_path)), "size",
                                     (json_int_t)req->body.len),
                           NULL, NULL);
}

enum MHD_Result http_handle_file_get(http_request *req)
{
    char *data;
    size_t len;
    rbx_error err = {0};
    if (rbx_file_get(req->server->engine, req->session_id, req->file_path,
                     req->server->options.max_download, &data, &len, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    struct MHD_Response *response =
        len ? MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE)
            : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!len || !response)
        free(data);
    if (!response)
        return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    /* Bytes a program wrote are never to be rendered as a page. */
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_DISPOSITION, "attachment");
    return http_reply(req, MHD_HTTP_OK, response, len);
}

enum MHD_Result http_handle_files_list(http_request *req)
{
    rbx_file_info *files;
    size_t count;
    rbx_error err = {0};
    if (rbx_file_list(req->server->engine, req->session_id, &files, &count, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    json_t *list = json_array();
    for (size_t i = 0; i < count; i++)
        json_array_append_new(list,
                              json_pack("{s:o, s:s, s:I, s:I}", "path",
                                        http_json_text(files[i].path, strlen(files[i].path)),
                                        "type", files[i].type, "size", (json_int_t)files[i].size,
                                        "modified", (json_int_t)files[i].modified_unix));
    free(files);
    return http_reply_json(req, MHD_HTTP_OK,
                           json_pack("{s:s, s:o}", "session_id", req->session_id, "files", list),
                           NULL, NULL);
}

enum MHD_Result http_handle_file_delete(http_request *req)
{
    rbx_error err = {0};
    if (rbx_file_delete(req->server->engine, req->session_id, req->file_path, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    return http_reply_json(req, MHD_HTTP_OK,
                           json_pack("{s:s, s:o, s:b}", "session_id", req->session_id, "path",
                                     http_json_text(req->file_path, strlen(req->file_path)),
                                     "removed", 1),
                           NULL, NULL);
}
