/* A build without the servers (cmake -DRBX_FRONTENDS=OFF: the engine and the
 * CLI alone): their commands say so instead of failing to link. */
#include "cli/cli.h"

static int not_built(const char *command)
{
    return cli_usage_error(NULL, "'%s' is not part of this build (built with RBX_FRONTENDS=OFF)",
                           command);
}

int cli_serve(cli_globals *globals, int argc, char **argv)
{
    (void)globals;
    (void)argc;
    (void)argv;
    return not_built("serve");
}

int cli_mcp(const cli_globals *globals, int argc, char **argv)
{
    (void)globals;
    (void)argc;
    (void)argv;
    return not_built("mcp");
}
