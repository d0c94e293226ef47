/* GET /v1/images: the images a request may name in "image" (the engine's
 * rbx_image_list_nameable), so a client (the playground's picker, an agent)
 * can offer them instead of guessing. The fields are `runbox images list
 * --json`'s. */
#include "http/http.h"

#include <stdlib.h>

enum MHD_Result http_handle_images(http_request *req)
{
    rbx_engine *engine = req->server->engine;
    rbx_image_info *infos;
    size_t count;
    rbx_error err = {0};
    if (rbx_image_list_nameable(engine, &infos, &count, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    json_t *list = json_array();
    for (size_t i = 0; i < count; i++) {
        json_t *image = api_json_of_text(rbx_image_info_to_json(&infos[i]));
        if (image)
            json_array_append_new(list, image);
    }
    free(infos);
    return http_reply_json(
        req, MHD_HTTP_OK,
        json_pack("{s:s, s:o}", "default", rbx_engine_default_image(engine), "images", list), NULL,
        NULL);
}
