/* What a `runbox daemon` is started with, and the key its socket is named
 * by (local/local.h). A daemon serves only the CLI configured as it is:
 * it gets every option that makes the CLI's engine (cli_engine), each
 * given whole so that nothing in the daemon's own environment changes
 * what it applies, and its socket is named by a digest of its engine's
 * configuration, so that a CLI configured otherwise never reaches it. */
#include "cli/cli.h"
#include "local/local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A value that is not UTF-8 text becomes null: cli_daemon_options then
 * refuses the whole, rather than start a daemon without that option. */
static void add(json_t *options, const char *option, const char *value)
{
    json_t *text = json_string(value);
    json_array_append_new(options, json_string(option));
    json_array_append_new(options, text ? text : json_null());
}

/* A number as text that reads back as the same double: a daemon given a
 * rounded --max-cpus would be configured otherwise than its CLI. */
static void add_number(json_t *options, const char *option, double value)
{
    char text[64];
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, value);
        if (strtod(text, NULL) == value)
            break;
    }
    add(options, option, text);
}

static void add_count(json_t *options, const char *option, unsigned long long value)
{
    char text[32];
    snprintf(text, sizeof text, "%llu", value);
    add(options, option, text);
}

json_t *cli_daemon_options(const cli_globals *g, const rbx_config *config)
{
    json_t *options = json_array();
    if (!options)
        return NULL;
    add(options, "--state-dir", config->state_dir);
    if (g->policy_file)
        add(options, "--policy", g->policy_file);
    add(options, "--install-network", g->install_network_host ? "host" : "outside");
    static const char *const storage[] = {"auto", "btrfs", "plain"};
    add(options, "--storage", storage[g->storage]);
    if (g->storage_bytes)
        add_count(options, "--storage-size", g->storage_bytes);
    if (g->max_cpus > 0)
        add_number(options, "--max-cpus", g->max_cpus);
    if (g->kernel_idle_s > 0)
        add_number(options, "--kernel-idle", g->kernel_idle_s);
    add(options, "--hibernate", g->hibernate_off ? "off" : "on");
    if (g->hibernate_below)
        add_count(options, "--hibernate-below",
                  g->hibernate_below < 0 ? 0 : (unsigned long long)g->hibernate_below);
    if (g->max_kernels)
        add_count(options, "--max-kernels", g->max_kernels);
    if (g->pool >= 0)
        add_count(options, "--pool", (unsigned long long)g->pool);
    if (g->pool_memory_bytes)
        add_count(options, "--pool-memory", g->pool_memory_bytes);
    if (g->pool_idle_s > 0)
        add_number(options, "--pool-idle", g->pool_idle_s);
    /* Always, and resolved: a default store found from the environment
     * (XDG_DATA_HOME, HOME) could be another in the daemon's. */
    add(options, "--images", config->images_dir);
    if (g->default_image)
        add(options, "--default-image", g->default_image);
    if (g->images_allowed)
        add(options, "--allow-images", g->images_allowed);
    add(options, "--egress-default",
        g->egress_open ? "open" : g->egress_allowlist_only ? "none" : "public");
    if (g->egress_allow)
        add(options, "--egress-allow", g->egress_allow);
    if (g->egress_deny)
        add(options, "--egress-deny", g->egress_deny);
    if (g->egress_resolver)
        add(options, "--egress-resolver", g->egress_resolver);
    if (g->egress_file)
        add(options, "--egress-file", g->egress_file);
    bool whole = json_array_size(options) % 2 == 0;
    for (size_t i = 0; whole && i < json_array_size(options); i++)
        whole = json_is_string(json_array_get(options, i));
    if (!whole) {
        json_decref(options);
        return NULL;
    }
    return options;
}

void cli_daemon_socket_name(const rbx_engine *engine, char *out, size_t size)
{
    /* The one-off digest (what an execution may do) and what else a
     * daemon is given: how long its kernels live, how many, its pool. */
    const rbx_config *c = rbx_engine_config(engine);
    char fingerprint[17], text[240];
    rbx_engine_fingerprint(engine, fingerprint);
    snprintf(text, sizeof text, "%s|%.17g|%u|%d|%u|%u|%.17g|%d|%lld", fingerprint,
             c->kernel_idle_s, c->max_kernels, c->pool_off, c->pool_max, c->pool_memory_mb,
             c->pool_idle_s, c->hibernate_off, (long long)c->hibernate_below_bytes);
    uint64_t hash = 14695981039346656037ull; /* FNV-1a: a name, not a secret */
    for (const char *p = text; *p; p++)
        hash = (hash ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(out, size, LOCAL_DAEMON_PREFIX "%016llx" LOCAL_DAEMON_SUFFIX,
             (unsigned long long)hash);
}

/* The value given for option in a list of options, or NULL. */
static const char *value_of(json_t *options, const char *option)
{
    for (size_t i = 0; i + 1 < json_array_size(options); i += 2)
        if (!strcmp(json_string_value(json_array_get(options, i)) ?: "", option))
            return json_string_value(json_array_get(options, i + 1));
    return NULL;
}

static void say_difference(char *out, size_t size, const char *option, const char *mine,
                           const char *theirs)
{
    size_t used = strlen(out);
    if (used + 1 >= size)
        return;
    /* Long values (a path, an egress list) are cut: the line stays one line. */
    snprintf(out + used, size - used, "%s%s (%.300s%s here, %.300s%s there)", used ? ", " : "",
             option, mine ? mine : "not given", mine && strlen(mine) > 300 ? "..." : "",
             theirs ? theirs : "not given", theirs && strlen(theirs) > 300 ? "..." : "");
}

void cli_daemon_options_differ(json_t *mine, json_t *theirs, char *out, size_t size)
{
    out[0] = 0;
    for (int pass = 0; pass < 2; pass++) {
        json_t *list = pass ? theirs : mine;
        for (size_t i = 0; i + 1 < json_array_size(list); i += 2) {
            const char *option = json_string_value(json_array_get(list, i));
            if (!option || !strcmp(option, "--state-dir"))
                continue;
            const char *a = value_of(mine, option), *b = value_of(theirs, option);
            if (pass && a)
                continue; /* said in the first pass */
            if (!a || !b || strcmp(a, b))
                say_difference(out, size, option, a, b);
        }
    }
}
