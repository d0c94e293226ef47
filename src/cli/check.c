/* runbox check: prints which guarantees hold on this host. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int cli_check(cli_globals *globals, int argc, char **argv)
{
    bool as_json = false;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            as_json = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: runbox check [--json]\n\nProbes the host and says which isolation "
                 "guarantees hold. Exits 1 when runbox cannot run code safely here.");
            return 0;
        } else if ((rc = cli_global_option(argc, argv, &i, globals, "check")) == CLI_NOT_GLOBAL)
            return cli_usage_error("check", "unexpected argument '%.64s'", argv[i]);
        else if (rc)
            return rc;
    }
    rbx_engine *engine = cli_engine(globals, &rc);
    if (!engine)
        return rc;
    rbx_check_item items[RBX_CHECK_MAX];
    size_t n = rbx_check(engine, items, RBX_CHECK_MAX);
    bool usable = true;
    for (size_t i = 0; i < n; i++)
        usable &= items[i].ok || !items[i].essential;
    if (as_json) {
        json_t *checks = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(checks, json_pack("{s:s, s:b, s:b, s:s}", "name", items[i].name,
                                                    "ok", items[i].ok, "essential",
                                                    items[i].essential, "detail", items[i].detail));
        cli_print_json(json_pack("{s:b, s:s, s:o}", "usable", usable, "state_dir",
                                 rbx_engine_config(engine)->state_dir, "checks", checks));
    } else {
        printf("state directory: %s\n\n", rbx_engine_config(engine)->state_dir);
        for (size_t i = 0; i < n; i++)
            printf("%-4s %-10s %s\n", items[i].ok ? "ok" : (items[i].essential ? "FAIL" : "no"),
                   items[i].name, items[i].detail);
        printf("\n%s\n", usable ? "runbox can run code safely on this host."
                                : "runbox cannot run code safely on this host (see FAIL above).");
    }
    rbx_engine_free(engine);
    return usable ? 0 : 1;
}
