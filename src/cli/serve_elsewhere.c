/* `runbox serve` is the program runbox-serve beside runbox (the same CLI
 * with the HTTP server built in): linking the server's libraries into
 * runbox itself would make every `runbox run` load libmicrohttpd and GnuTLS
 * first, about 2 ms each time. This hands the whole command line over. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SERVER_PROGRAM "runbox-serve"

int cli_serve(cli_globals *globals, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - sizeof SERVER_PROGRAM - 1);
    char *slash = n > 0 ? memrchr(path, '/', (size_t)n) : NULL;
    if (!slash) {
        fprintf(stderr, "runbox: cannot find where runbox is installed (/proc/self/exe): %s\n",
                strerror(errno));
        return EXIT_SYSTEM;
    }
    memcpy(slash + 1, SERVER_PROGRAM, sizeof SERVER_PROGRAM);
    char *const original = globals->argv[0];
    globals->argv[0] = path;
    execv(path, globals->argv);
    globals->argv[0] = original;
    fprintf(stderr,
            "runbox: cannot start the HTTP server %s: %s (it is built beside runbox by "
            "`make build`)\n",
            path, strerror(errno));
    return EXIT_SYSTEM;
}
