/* The JSON forms of runbox's API that the front ends read: an execute
 * request (HTTP's body, the local socket's messages) turned into an
 * rbx_request with every field checked for its type, and the words their
 * errors use for JSON's types. Uses nothing of the engine but include/runbox.h. */
#ifndef RBX_API_FORM_H
#define RBX_API_FORM_H

#include "runbox.h"

#include <jansson.h>
#include <stdbool.h>

/* "an object", "a string", ...: what a JSON value is, for error messages
 * of the front ends that parse JSON (HTTP, MCP). */
const char *api_json_type_name(const json_t *value);

/* The JSON the engine wrote as text (rbx_session_info_to_json,
 * rbx_image_info_to_json: malloc'ed, freed here), parsed; NULL for none. */
json_t *api_json_of_text(char *text);

/* An execute request as JSON (HTTP's body, the local socket's
 * messages) turned into an rbx_request; the request's strings point into
 * body, which the form owns from then on (also on failure). */
typedef struct api_form {
    json_t *body;
    rbx_request request;
    char **env; /* "NAME=value" entries, owned */
    const char **requirements;
    const char **egress_allow; /* the strings point into body */
    int stream;                /* the "stream" field (HTTP): -1 when not given */
} api_form;

typedef struct form_error {
    char message[600];
    bool no_memory; /* else the request was at fault */
} form_error;

bool api_form_parse(api_form *form, json_t *body, form_error *err);
void api_form_free(api_form *form);

#endif
