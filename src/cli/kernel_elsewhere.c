/* A stateful call whose session's kernel lives in another runbox process
 * (a daemon of other options, or runbox serve configured otherwise): the
 * error that says which options differ, asked of that process on its
 * socket, and how to proceed. */
#include "cli/cli.h"
#include "local/local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_kernel_holder(rbx_engine *engine, const char *session_id, const char *language)
{
    const char *canonical = language ? rbx_runtime_canonical(language) : NULL;
    rbx_session_info info;
    rbx_error err = {0};
    if (!session_id || !canonical || rbx_session_info_get(engine, session_id, &info, &err))
        return 0;
    for (size_t i = 0; i < info.kernel_count; i++)
        if (!info.kernels[i].hibernated && !strcmp(info.kernels[i].language, canonical))
            return info.kernels[i].owner_pid;
    return 0;
}

/* The options of the process at pid, asked on each socket of the state
 * directory (a new reference, or NULL: not found, or runbox serve, which
 * does not say); *what says what it is. */
static json_t *options_of(const char *state_dir, int pid, const char **what)
{
    char **names = cli_local_sockets(state_dir);
    json_t *options = NULL;
    *what = "another runbox process";
    for (size_t i = 0; names && names[i]; i++) {
        json_t *pong = cli_local_ask(state_dir, names[i], json_pack("{s:s}", "op", "ping"));
        if (json_integer_value(json_object_get(pong, "pid")) == pid) {
            *what = strcmp(names[i], LOCAL_SOCKET) ? "a runbox daemon" : "runbox serve";
            options = json_incref(json_object_get(pong, "options"));
            json_decref(pong);
            break;
        }
        json_decref(pong);
    }
    cli_local_sockets_free(names);
    return options;
}

int cli_kernel_elsewhere_error(const cli_globals *globals, rbx_engine *engine,
                               const char *session_id, const char *language)
{
    const char *state_dir = rbx_engine_config(engine)->state_dir;
    const char *canonical = rbx_runtime_canonical(language);
    int pid = cli_kernel_holder(engine, session_id, language);
    const char *what;
    json_t *theirs = options_of(state_dir, pid, &what);
    json_t *mine = cli_daemon_options(globals, rbx_engine_config(engine));
    char differ[2048] = "";
    if (theirs && mine)
        cli_daemon_options_differ(mine, theirs, differ, sizeof differ);
    for (char *c = differ; *c; c++) /* one line, whatever a path holds */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    fprintf(stderr,
            "runbox: the %s kernel of session %s lives in %s (pid %d) %s%s; give the same "
            "options to reach it, or stop it with 'runbox sessions restart %s --language %s' "
            "(its state is lost) and call again\n",
            canonical, session_id, what, pid,
            *differ ? "started with other options: " : "configured otherwise", differ,
            session_id, canonical);
    json_decref(theirs);
    json_decref(mine);
    return EXIT_USAGE;
}
