/* Options that every command takes (where sessions live, the operator's
 * policy, the network of installs): accepted before the command and after
 * it, so `runbox serve --state-dir DIR` works like `runbox --state-dir DIR
 * serve`. Each command's parser offers the options it does not know here. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_count(const char *text, uint32_t *count)
{
    char *end;
    unsigned long value = text[0] >= '0' && text[0] <= '9' ? strtoul(text, &end, 10) : 0;
    if (!value || *end || value > 100000)
        return -1;
    *count = (uint32_t)value;
    return 0;
}

/* A memory size (cli_parse_size), or 0 for never (kept as -1). */
static int parse_memory_floor(const char *text, int64_t *bytes)
{
    uint64_t size;
    if (!strcmp(text, "0")) {
        *bytes = -1;
        return 0;
    }
    if (cli_parse_size(text, &size) != 0 || size > (uint64_t)INT64_MAX)
        return -1;
    *bytes = (int64_t)size;
    return 0;
}

static int daemon_choice(const char *text, cli_globals *globals)
{
    static const char *const names[] = {"auto", "always", "never"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(text, names[i])) {
            globals->use_daemon = i;
            return 0;
        }
    return -1;
}

/* A pool size: 0 (off) to 1000. */
static int parse_pool(const char *text, int32_t *pool)
{
    char *end;
    unsigned long value = text[0] >= '0' && text[0] <= '9' ? strtoul(text, &end, 10) : 1001;
    if (value > 1000 || *end)
        return -1;
    *pool = (int32_t)value;
    return 0;
}

static int storage_choice(const char *text, rbx_storage_choice *choice)
{
    if (!strcmp(text, "auto"))
        *choice = RBX_STORAGE_AUTO;
    else if (!strcmp(text, "btrfs"))
        *choice = RBX_STORAGE_CHOOSE_BTRFS;
    else if (!strcmp(text, "plain"))
        *choice = RBX_STORAGE_CHOOSE_PLAIN;
    else
        return -1;
    return 0;
}

/* --egress-default: the public internet, only what is allowed, or no
 * policy at all. */
static int egress_default_choice(const char *text, cli_globals *globals)
{
    if (strcmp(text, "public") && strcmp(text, "none") && strcmp(text, "open"))
        return -1;
    globals->egress_allowlist_only = !strcmp(text, "none");
    globals->egress_open = !strcmp(text, "open");
    return 0;
}

/* An empty variable is the same as an unset one. */
static const char *env_value(const char *name)
{
    const char *value = getenv(name);
    return value && *value ? value : NULL;
}

static void egress_init(cli_globals *globals)
{
    globals->egress_allow = getenv("RUNBOX_EGRESS_ALLOW");
    globals->egress_deny = getenv("RUNBOX_EGRESS_DENY");
    globals->egress_resolver = env_value("RUNBOX_EGRESS_RESOLVER");
    globals->egress_file = env_value("RUNBOX_EGRESS_FILE");
    /* F_OK, not R_OK: a policy file there that cannot be read is an error
     * the engine reports, not a policy silently left out. */
    if (!globals->egress_file && access(CLI_DEFAULT_EGRESS, F_OK) == 0)
        globals->egress_file = CLI_DEFAULT_EGRESS;
    /* A misspelt "none" must not open the network: it is refused (cli_engine). */
    const char *choice = env_value("RUNBOX_EGRESS_DEFAULT");
    if (choice && egress_default_choice(choice, globals) != 0)
        globals->egress_default_bad = choice;
}

void cli_globals_init(cli_globals *globals, char **argv)
{
    *globals = (cli_globals){.argv = argv,
                             .pool = -1,
                             .state_dir = getenv("RUNBOX_STATE_DIR"),
                             .images_dir = getenv("RUNBOX_IMAGES"),
                             .default_image = getenv("RUNBOX_DEFAULT_IMAGE"),
                             .images_allowed = getenv("RUNBOX_ALLOW_IMAGES"),
                             .policy_file = getenv("RUNBOX_POLICY"),
                             .criu = env_value("RUNBOX_CRIU")};
    if (!globals->policy_file && access(CLI_DEFAULT_POLICY, R_OK) == 0)
        globals->policy_file = CLI_DEFAULT_POLICY;
    const char *install_network = getenv("RUNBOX_INSTALL_NETWORK");
    globals->install_network_host = install_network && !strcmp(install_network, "host");
    const char *max_cpus = getenv("RUNBOX_MAX_CPUS");
    if (max_cpus && cli_parse_seconds(max_cpus, &globals->max_cpus) != 0)
        globals->max_cpus = 0; /* the default, like any value that is not a number */
    const char *storage = getenv("RUNBOX_STORAGE");
    if (storage)
        (void)storage_choice(storage, &globals->storage);
    const char *size = getenv("RUNBOX_STORAGE_SIZE");
    if (size)
        (void)cli_parse_size(size, &globals->storage_bytes);
    const char *idle = getenv("RUNBOX_KERNEL_IDLE");
    if (idle)
        (void)cli_parse_seconds(idle, &globals->kernel_idle_s);
    const char *hibernate = getenv("RUNBOX_HIBERNATE");
    if (hibernate)
        globals->hibernate_off = !strcmp(hibernate, "off");
    const char *below = getenv("RUNBOX_HIBERNATE_BELOW");
    if (below)
        (void)parse_memory_floor(below, &globals->hibernate_below);
    const char *kernels = getenv("RUNBOX_MAX_KERNELS");
    if (kernels)
        (void)parse_count(kernels, &globals->max_kernels);
    const char *pool = getenv("RUNBOX_POOL");
    if (pool)
        (void)parse_pool(pool, &globals->pool);
    const char *use_daemon = getenv("RUNBOX_USE_DAEMON");
    if (use_daemon)
        (void)daemon_choice(use_daemon, globals);
    const char *pool_idle = getenv("RUNBOX_POOL_IDLE");
    if (pool_idle)
        (void)cli_parse_seconds(pool_idle, &globals->pool_idle_s);
    const char *pool_memory = getenv("RUNBOX_POOL_MEMORY");
    if (pool_memory)
        (void)cli_parse_size(pool_memory, &globals->pool_memory_bytes);
    egress_init(globals);
}

/* --name VALUE or --name=VALUE; NULL when the value is missing. */
static const char *value_of(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    return *i + 1 < argc ? argv[++*i] : NULL;
}

static bool named(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == 0 || arg[n] == '=');
}

/* The egress policy's options; CLI_NOT_GLOBAL for any other. A list may be
 * empty (nothing more allowed or denied). */
static int egress_option(int argc, char **argv, int *i, cli_globals *globals, const char *command)
{
    const char *arg = argv[*i];
    const char *value;
    if (named(arg, "--egress-allow")) {
        if (!(value = value_of(argc, argv, i, "--egress-allow")))
            return cli_usage_error(command, "--egress-allow needs a list of CIDRs, addresses or "
                                            "domain names, e.g. --egress-allow 10.1.2.0/24,"
                                            "pypi.internal");
        globals->egress_allow = value;
    } else if (named(arg, "--egress-deny")) {
        if (!(value = value_of(argc, argv, i, "--egress-deny")))
            return cli_usage_error(command, "--egress-deny needs a list of CIDRs, addresses or "
                                            "domain names, e.g. --egress-deny 203.0.113.0/24");
        globals->egress_deny = value;
    } else if (named(arg, "--egress-default")) {
        value = value_of(argc, argv, i, "--egress-default");
        if (!value || egress_default_choice(value, globals) != 0)
            return cli_usage_error(command,
                                   "--egress-default must be 'public' (the public internet), "
                                   "'none' (only --egress-allow) or 'open' (no policy), not "
                                   "'%.32s'",
                                   value ? value : "");
        globals->egress_default_bad = NULL;
    } else if (named(arg, "--egress-resolver")) {
        if (!(value = value_of(argc, argv, i, "--egress-resolver")) || !*value)
            return cli_usage_error(command, "--egress-resolver needs an address, ADDR or "
                                            "ADDR:PORT ([V6]:PORT), e.g. --egress-resolver "
                                            "10.0.0.53");
        globals->egress_resolver = value;
    } else if (named(arg, "--egress-file")) {
        if (!(value = value_of(argc, argv, i, "--egress-file")) || !*value)
            return cli_usage_error(command, "--egress-file needs a file");
        globals->egress_file = value;
    } else {
        return CLI_NOT_GLOBAL;
    }
    return 0;
}

int cli_global_option(int argc, char **argv, int *i, cli_globals *globals, const char *command)
{
    const char *arg = argv[*i];
    const char *value;
    if (named(arg, "--state-dir")) {
        if (!(value = value_of(argc, argv, i, "--state-dir")) || !*value)
            return cli_usage_error(command, "--state-dir needs a directory");
        globals->state_dir = value;
    } else if (named(arg, "--images")) {
        if (!(value = value_of(argc, argv, i, "--images")) || !*value)
            return cli_usage_error(command, "--images needs a directory (the image store)");
        globals->images_dir = value;
    } else if (named(arg, "--default-image")) {
        if (!(value = value_of(argc, argv, i, "--default-image")) || !*value)
            return cli_usage_error(command, "--default-image needs an image's name, or host "
                                            "(the host's /usr)");
        globals->default_image = value;
    } else if (named(arg, "--allow-images")) {
        if (!(value = value_of(argc, argv, i, "--allow-images")) || !*value)
            return cli_usage_error(command, "--allow-images needs the images requests may name, "
                                            "comma-separated (host for the host's /usr), e.g. "
                                            "--allow-images default,host");
        globals->images_allowed = value;
    } else if (named(arg, "--policy")) {
        if (!(value = value_of(argc, argv, i, "--policy")) || !*value)
            return cli_usage_error(command, "--policy needs a file");
        globals->policy_file = value;
    } else if (named(arg, "--install-network")) {
        value = value_of(argc, argv, i, "--install-network");
        if (!value || (strcmp(value, "outside") && strcmp(value, "host")))
            return cli_usage_error(command,
                                   "--install-network must be 'outside' or 'host', not "
                                   "'%.32s'",
                                   value ? value : "");
        globals->install_network_host = !strcmp(value, "host");
    } else if (named(arg, "--max-cpus")) {
        value = value_of(argc, argv, i, "--max-cpus");
        if (!value || cli_parse_seconds(value, &globals->max_cpus) != 0)
            return cli_usage_error(command, "--max-cpus needs a number of cores above 0, e.g. "
                                            "--max-cpus 2");
    } else if (named(arg, "--storage")) {
        value = value_of(argc, argv, i, "--storage");
        if (!value || storage_choice(value, &globals->storage) != 0)
            return cli_usage_error(command, "--storage must be auto, btrfs or plain, not '%.32s'",
                                   value ? value : "");
    } else if (named(arg, "--kernel-idle")) {
        value = value_of(argc, argv, i, "--kernel-idle");
        if (!value || cli_parse_seconds(value, &globals->kernel_idle_s) != 0)
            return cli_usage_error(command, "--kernel-idle needs a number of seconds above 0");
    } else if (named(arg, "--hibernate")) {
        value = value_of(argc, argv, i, "--hibernate");
        if (!value || (strcmp(value, "on") && strcmp(value, "off")))
            return cli_usage_error(command, "--hibernate must be on or off, not '%.32s'",
                                   value ? value : "");
        globals->hibernate_off = !strcmp(value, "off");
    } else if (named(arg, "--hibernate-below")) {
        value = value_of(argc, argv, i, "--hibernate-below");
        if (!value || parse_memory_floor(value, &globals->hibernate_below) != 0)
            return cli_usage_error(command, "--hibernate-below needs the host's available "
                                            "memory below which idle kernels hibernate, e.g. "
                                            "2G, or 0 (never), not '%.32s'",
                                   value ? value : "");
    } else if (named(arg, "--max-kernels")) {
        value = value_of(argc, argv, i, "--max-kernels");
        if (!value || parse_count(value, &globals->max_kernels) != 0)
            return cli_usage_error(command, "--max-kernels needs a whole number from 1 to 100000");
    } else if (named(arg, "--pool")) {
        value = value_of(argc, argv, i, "--pool");
        if (!value || parse_pool(value, &globals->pool) != 0)
            return cli_usage_error(command,
                                   "--pool needs how many prepared sandboxes may exist "
                                   "at once, 0 (off) to 1000, not '%.32s'",
                                   value ? value : "");
    } else if (named(arg, "--use-daemon")) {
        value = value_of(argc, argv, i, "--use-daemon");
        if (!value || daemon_choice(value, globals) != 0)
            return cli_usage_error(command,
                                   "--use-daemon must be auto (a running one serves one-off "
                                   "runs), always (start one) or never, not '%.32s'",
                                   value ? value : "");
    } else if (named(arg, "--pool-idle")) {
        value = value_of(argc, argv, i, "--pool-idle");
        if (!value || cli_parse_seconds(value, &globals->pool_idle_s) != 0)
            return cli_usage_error(command, "--pool-idle needs a number of seconds above 0 (how "
                                            "long a language's prepared sandboxes go unused "
                                            "before the pool keeps one fewer)");
    } else if (named(arg, "--pool-memory")) {
        value = value_of(argc, argv, i, "--pool-memory");
        if (!value || cli_parse_size(value, &globals->pool_memory_bytes) != 0 ||
            globals->pool_memory_bytes < (1u << 20))
            return cli_usage_error(command, "--pool-memory needs a size of at least 1M, such "
                                            "as 256M or 2G");
    } else if (named(arg, "--storage-size")) {
        value = value_of(argc, argv, i, "--storage-size");
        if (!value || cli_parse_size(value, &globals->storage_bytes) != 0)
            return cli_usage_error(command, "--storage-size needs a size such as 512M, 20G or 1T");
    } else {
        return egress_option(argc, argv, i, globals, command);
    }
    return 0;
}
