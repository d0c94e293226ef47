/* E2B's sandboxes (http.h). A placeholder until the control plane keeps
 * them: every sandbox id names a session of the same id, made on first
 * use, with no token of its own. */
#include "http/http.h"

#include <stdio.h>
#include <string.h>

bool e2b_sandbox_for_request(http_server *server, struct MHD_Connection *connection,
                             e2b_sandbox_view *view, http_error *err)
{
    const char *id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "E2b-Sandbox-Id");
    if (!id || strlen(id) > E2B_SANDBOX_ID_MAX || !rbx_session_id_valid(id)) {
        http_error_set(err, 502, "not_found", "sandbox %.80s was not found", id ? id : "(none)");
        return false;
    }
    *view = (e2b_sandbox_view){.network = -1};
    snprintf(view->id, sizeof view->id, "%s", id);
    snprintf(view->session_id, sizeof view->session_id, "%s", id);
    rbx_error engine_err;
    if (!rbx_session_exists(server->engine, id) &&
        rbx_session_create(server->engine, id, &engine_err) != RBX_OK) {
        http_error_from_engine(err, &engine_err);
        return false;
    }
    return true;
}

void e2b_sandbox_view_release(e2b_sandbox_view *view)
{
    json_decref(view->env);
    json_decref(view->egress_allow);
    view->env = view->egress_allow = NULL;
}
