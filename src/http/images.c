/* GET /v1/images: the images a request may name in "image", so a client
 * (the playground's picker, an agent) can offer them instead of guessing.
 * The fields are `runbox images list --json`'s; images the operator does
 * not allow are left out, and "host" is listed when it is allowed. */
#include "http/http.h"

#include <stdlib.h>

static void append(json_t *list, const rbx_image_info *info)
{
    char *text = rbx_image_info_to_json(info);
    json_t *obj = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (obj)
        json_array_append_new(list, obj);
}

enum MHD_Result http_handle_images(http_request *req)
{
    rbx_engine *engine = req->server->engine;
    rbx_image_info *infos;
    size_t count;
    rbx_error err = {0};
    if (rbx_image_list(engine, &infos, &count, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    json_t *list = json_array();
    for (size_t i = 0; i < count; i++)
        if (infos[i].allowed)
            append(list, &infos[i]);
    free(infos);
    rbx_image_info host;
    rbx_image_host_info(engine, &host);
    if (host.allowed)
        append(list, &host);
    return http_reply_json(
        req, MHD_HTTP_OK,
        json_pack("{s:s, s:o}", "default", rbx_engine_default_image(engine), "images", list), NULL,
        NULL);
}
