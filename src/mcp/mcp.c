/* Placeholder until the MCP front end lands (issue 6): refuses clearly. */
#include "cli/cli.h"

int cli_mcp(const cli_globals *globals, int argc, char **argv)
{
    (void)globals;
    (void)argc;
    (void)argv;
    return cli_usage_error(NULL, "'mcp' is not available in this build yet");
}
