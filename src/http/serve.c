/* Placeholder until the HTTP front end lands (issue 5): refuses clearly. */
#include "cli/cli.h"

int cli_serve(const cli_globals *globals, int argc, char **argv)
{
    (void)globals;
    (void)argc;
    (void)argv;
    return cli_usage_error(NULL, "'serve' is not available in this build yet");
}
