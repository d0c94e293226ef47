/* runbox: the command-line front end. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: runbox [options] COMMAND [ARGS] [options]\n"
    "\n"
    "Runs Python, JavaScript and Bash code for AI agents, isolated and bounded,\n"
    "and reports a structured result.\n"
    "\n"
    "commands:\n"
    "  run LANGUAGE (-c CODE | FILE | -)   run code (see 'runbox run --help')\n"
    "  sessions list|new|rm|gc             manage sessions (see 'runbox sessions --help')\n"
    "  check [--json]                      which isolation guarantees hold on this host\n"
    "                                      (and whether checkpoints work: the criu of\n"
    "                                      `make deps`, else criu on the PATH, or the\n"
    "                                      one RUNBOX_CRIU names)\n"
    "  envs list|gc                        cached dependency environments\n"
    "  images list|build|import|rm         root images sandboxes run on (Python 3.13, ...)\n"
    "  files list|put|get|rm SESSION ...   a session's files\n"
    "  storage [show|unmount]              where sessions' files live, and how capped\n"
    "  daemon                              serve stateful calls of the CLI configured as it\n"
    "                                      is (started on demand, one per configuration)\n"
    "  serve [--listen ADDR:PORT]          the HTTP API (see 'runbox serve --help')\n"
    "  mcp                                 a Model Context Protocol server on stdio\n"
    "\n"
    "options (before or after the command):\n"
    "  --state-dir DIR   where sessions live (also RUNBOX_STATE_DIR; default\n"
    "                    /var/lib/runbox as root, else $XDG_STATE_HOME/runbox)\n"
    "  --images DIR      the image store (also RUNBOX_IMAGES; default the host's,\n"
    "                    whatever the state directory: /var/lib/runbox/images as\n"
    "                    root, else $XDG_DATA_HOME/runbox/images)\n"
    "  --default-image NAME\n"
    "                    the image executions get when they name none (also\n"
    "                    RUNBOX_DEFAULT_IMAGE; default \"default\" when the store has it,\n"
    "                    else \"host\", the host's own /usr)\n"
    "  --allow-images LIST\n"
    "                    the images requests may name, comma-separated (also\n"
    "                    RUNBOX_ALLOW_IMAGES; default any the store has, and host)\n"
    "  --policy FILE     deny patterns checked before code runs (also RUNBOX_POLICY;\n"
    "                    default " CLI_DEFAULT_POLICY " when it exists)\n"
    "  --install-network outside|host\n"
    "                    the network of dependency installs: outside hosts only (the\n"
    "                    default), or the host's own network, loopback included, for a\n"
    "                    package mirror there (also RUNBOX_INSTALL_NETWORK)\n"
    "  --max-cpus N      the most cores an execution may ask for (also\n"
    "                    RUNBOX_MAX_CPUS; default the host's cores); each gets 1 unless\n"
    "                    it asks (--cpus, \"cpus\")\n"
    "  --storage auto|btrfs|plain\n"
    "                    where sessions' files live (also RUNBOX_STORAGE): a btrfs image\n"
    "                    with a quota per session where the host allows (auto, the\n"
    "                    default; btrfs: required), or plain directories, not capped\n"
    "  --storage-size SIZE\n"
    "                    the size of a new state directory's image, e.g. 20G (also\n"
    "                    RUNBOX_STORAGE_SIZE; default half the host's free space, at\n"
    "                    most 64G)\n"
    "  --kernel-idle SECONDS\n"
    "                    hibernate a stateful session's kernel idle this long (or stop\n"
    "                    it: see --hibernate; its files stay; also RUNBOX_KERNEL_IDLE;\n"
    "                    default 900)\n"
    "  --hibernate on|off\n"
    "                    on: a kernel that idles out, or whose runbox stops, is\n"
    "                    checkpointed to its session's directory and woken, state and\n"
    "                    all, by its next call (root, with criu: see runbox check);\n"
    "                    off: stopped (also RUNBOX_HIBERNATE; default on)\n"
    "  --hibernate-below SIZE\n"
    "                    while the host's available memory is below SIZE, the least\n"
    "                    recently used idle kernel hibernates (one a second), e.g. 2G\n"
    "                    (also RUNBOX_HIBERNATE_BELOW; default a tenth of the host's\n"
    "                    memory; 0: never)\n"
    "  --max-kernels N   live kernels per runbox process (also RUNBOX_MAX_KERNELS;\n"
    "                    default from the host's memory)\n"
    "  --pool N          prepared sandboxes that serve, daemon and mcp keep ready for\n"
    "                    one-off executions, at most N at once (also RUNBOX_POOL;\n"
    "                    default 8; 0: none, every execution starts cold)\n"
    "  --pool-memory SIZE\n"
    "                    the most memory the waiting ones may hold together, e.g.\n"
    "                    256M (also RUNBOX_POOL_MEMORY; default 512M)\n"
    "  --pool-idle SECONDS\n"
    "                    a language's prepared sandboxes unused this long: one fewer\n"
    "                    is kept (also RUNBOX_POOL_IDLE; default 30)\n"
    "  --use-daemon auto|always|never\n"
    "                    whether `run` sends a one-off run to the runbox process that\n"
    "                    serves the state directory (serve, or the daemon of these\n"
    "                    options), whose prepared sandboxes start it sooner: when one\n"
    "                    runs and is configured alike (auto, the default), starting a\n"
    "                    daemon if none runs (always), or never (also RUNBOX_USE_DAEMON)\n"
    "  --help            this text\n"
    "  --version         runbox's version\n"
    "\n"
    "egress, where executions with the network on may connect (LIST: CIDRs,\n"
    "addresses and domain names such as pypi.org or *.example.com, separated by\n"
    "commas or spaces; deny wins over allow; the host's own addresses are never\n"
    "reachable):\n"
    "  --egress-default public|none|open\n"
    "                    public: the public internet, never private, link-local,\n"
    "                    loopback or multicast addresses (the default); none: only\n"
    "                    --egress-allow; open: no policy, for hosts without\n"
    "                    nftables or with a firewall of their own (also\n"
    "                    RUNBOX_EGRESS_DEFAULT)\n"
    "  --egress-allow LIST\n"
    "                    reachable as well, e.g. a private mirror (also\n"
    "                    RUNBOX_EGRESS_ALLOW); after `run` the option is the run's\n"
    "                    own instead, which narrows (see 'runbox run --help')\n"
    "  --egress-deny LIST\n"
    "                    never reachable (also RUNBOX_EGRESS_DENY)\n"
    "  --egress-resolver ADDR[:PORT]\n"
    "                    where sandboxes' names are resolved ([V6]:PORT for IPv6;\n"
    "                    also RUNBOX_EGRESS_RESOLVER; default the host's\n"
    "                    /etc/resolv.conf)\n"
    "  --egress-file FILE\n"
    "                    lines 'allow X', 'deny X', 'default public|none', 'resolver\n"
    "                    ADDR', '#' comments (also RUNBOX_EGRESS_FILE; default\n"
    "                    " CLI_DEFAULT_EGRESS " when it exists)\n";

int main(int argc, char **argv)
{
    cli_globals globals;
    cli_globals_init(&globals, argv);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("runbox %s\n", RBX_VERSION);
            return 0;
        }
        int rc = cli_global_option(argc, argv, &i, &globals, NULL);
        if (rc == CLI_NOT_GLOBAL)
            return cli_usage_error(NULL, "unknown option '%.64s'", argv[i]);
        if (rc)
            return rc;
    }
    if (i >= argc) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    const char *command = argv[i];
    if (!strcmp(command, "run"))
        return cli_run(&globals, argc - i, argv + i);
    if (!strcmp(command, "sessions"))
        return cli_sessions(&globals, argc - i, argv + i);
    if (!strcmp(command, "check"))
        return cli_check(&globals, argc - i, argv + i);
    if (!strcmp(command, "envs"))
        return cli_envs(&globals, argc - i, argv + i);
    if (!strcmp(command, "images"))
        return cli_images(&globals, argc - i, argv + i);
    if (!strcmp(command, "files"))
        return cli_files(&globals, argc - i, argv + i);
    if (!strcmp(command, "storage"))
        return cli_storage(&globals, argc - i, argv + i);
    if (!strcmp(command, "daemon"))
        return cli_daemon(&globals, argc - i, argv + i);
    if (!strcmp(command, "serve"))
        return cli_serve(&globals, argc - i, argv + i);
    if (!strcmp(command, "mcp"))
        return cli_mcp(&globals, argc - i, argv + i);
    if (!strcmp(command, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    return cli_usage_error(
        NULL,
        "unknown command '%.64s' (accepted: run, sessions, files, envs, images, storage, check, "
        "serve, mcp)",
        command);
}
