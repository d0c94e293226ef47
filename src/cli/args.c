/* Helpers shared by the CLI's commands: errors, numbers, files. */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *command, const char *fmt, ...)
{
    char message[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    /* One line, whatever the user typed. */
    for (char *p = message; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "runbox: %s (see 'runbox %s%s--help')\n", message, command ? command : "",
            command ? " " : "");
    return EXIT_USAGE;
}

int cli_print_json(json_t *value)
{
    char *text = json_dumps(value, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(value);
    int rc = text && puts(text) >= 0 && fflush(stdout) == 0 ? 0 : EXIT_SYSTEM;
    free(text);
    return rc;
}

int cli_engine_error(const rbx_error *err)
{
    char message[sizeof err->message];
    snprintf(message, sizeof message, "%s", err->message);
    for (char *p = message; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "runbox: %s\n", message);
    switch (err->status) {
    case RBX_EINVAL:
    case RBX_ENOENT:
    case RBX_EBUSY:
        return EXIT_USAGE;
    default:
        return EXIT_SYSTEM;
    }
}

static rbx_engine *make_engine(const cli_globals *globals, bool storage_later, int *exit_code)
{
    rbx_config config;
    rbx_config_defaults(&config);
    config.storage_later = storage_later;
    config.state_dir = globals->state_dir;
    config.policy_file = globals->policy_file;
    config.install_network_host = globals->install_network_host;
    config.max_cpus = globals->max_cpus;
    config.storage = globals->storage;
    config.storage_bytes = globals->storage_bytes;
    config.kernel_idle_s = globals->kernel_idle_s;
    config.hibernate_off = globals->hibernate_off;
    config.hibernate_below_bytes = globals->hibernate_below;
    config.max_kernels = globals->max_kernels;
    config.pool_off = globals->pool == 0;
    config.pool_max = globals->pool > 0 ? (uint32_t)globals->pool : 0;
    config.pool_memory_mb = (uint32_t)(globals->pool_memory_bytes >> 20);
    config.pool_idle_s = globals->pool_idle_s;
    if (globals->egress_default_bad) {
        *exit_code =
            cli_usage_error(NULL,
                            "RUNBOX_EGRESS_DEFAULT must be 'public', 'none' or 'open', not "
                            "'%.32s'",
                            globals->egress_default_bad);
        return NULL;
    }
    config.egress_allow = globals->egress_allow;
    config.egress_deny = globals->egress_deny;
    config.egress_allowlist_only = globals->egress_allowlist_only;
    config.egress_open = globals->egress_open;
    config.egress_resolver = globals->egress_resolver;
    config.egress_file = globals->egress_file;
    config.images_dir = globals->images_dir;
    config.image = globals->default_image;
    config.images_allowed = globals->images_allowed;
    config.criu = globals->criu;
    rbx_error err = {0};
    rbx_engine *engine = rbx_engine_new(&config, &err);
    if (!engine)
        *exit_code = cli_engine_error(&err);
    return engine;
}

rbx_engine *cli_engine(const cli_globals *globals, int *exit_code)
{
    return make_engine(globals, false, exit_code);
}

rbx_engine *cli_engine_storage_later(const cli_globals *globals, int *exit_code)
{
    return make_engine(globals, true, exit_code);
}

int cli_parse_size(const char *text, uint64_t *bytes)
{
    char *end;
    errno = 0;
    if (!text || text[0] < '0' || text[0] > '9')
        return -1;
    unsigned long long value = strtoull(text, &end, 10);
    static const char units[] = "KMGT";
    const char *unit = *end ? strchr(units, *end) : NULL;
    if (errno || (*end && (!unit || end[1])))
        return -1;
    unsigned shift = unit ? 10 * (unsigned)(unit - units + 1) : 0;
    if (value == 0 || value > (~0ull >> shift))
        return -1;
    *bytes = (uint64_t)value << shift;
    return 0;
}

int cli_parse_seconds(const char *text, double *seconds)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(value) || value <= 0)
        return -1;
    *seconds = value;
    return 0;
}

int cli_read_file(const char *path, size_t limit, char **data, size_t *len, char *why,
                  size_t why_size)
{
    FILE *file = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!file) {
        snprintf(why, why_size, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 65536, used = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (used == cap) {
            if (cap > limit)
                break;
            cap *= 2;
            char *grown = realloc(buf, cap + 1);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        size_t n = fread(buf + used, 1, cap - used, file);
        used += n;
        if (n == 0)
            break;
        if (used > limit)
            break;
    }
    bool failed = !buf || ferror(file);
    if (file != stdin)
        fclose(file);
    if (failed) {
        free(buf);
        snprintf(why, why_size, "cannot read %s", path);
        return -1;
    }
    if (used > limit) {
        free(buf);
        snprintf(why, why_size, "%s is larger than the limit of %zu bytes", path, limit);
        return -1;
    }
    buf[used] = 0;
    *data = buf;
    *len = used;
    return 0;
}

void cli_start_pool(rbx_engine *engine, const char *command)
{
    char why[300];
    if (!rbx_engine_start_pool(engine, why, sizeof why) && !rbx_engine_config(engine)->pool_off)
        fprintf(stderr, "runbox %s: no prepared sandboxes (%s); executions start cold\n", command,
                why);
}
