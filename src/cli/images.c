/* runbox images: the root images sandboxes run on (src/images.c). */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char images_usage[] =
    "usage: runbox images COMMAND [--json]\n"
    "\n"
    "  list                             the store's images: name, digest, size, source\n"
    "  build NAME [--packages LIST] [--from IMAGE] [--suite SUITE] [--mirror URL]\n"
    "                                   a Debian root built with mmdebstrap (root only):\n"
    "                                   the suite's essential packages and LIST (Debian\n"
    "                                   packages, comma-separated), plus those IMAGE was\n"
    "                                   built with; `build default` with no LIST makes the\n"
    "                                   default image (Debian 13: Python 3.13, Node.js 24,\n"
    "                                   numpy, pandas, matplotlib, scipy, ...)\n"
    "  import NAME SOURCE [--drop-setid]\n"
    "                                   an image made elsewhere: a root filesystem tar, an\n"
    "                                   OCI layout directory (podman save --format oci-dir,\n"
    "                                   skopeo copy ... oci:DIR) or a tar of one (docker\n"
    "                                   save, oci-archive); device nodes, set-id files,\n"
    "                                   links leading out and oversized members are\n"
    "                                   refused (--drop-setid clears set-id bits instead)\n"
    "  rm NAME                          removes the name (its tree when no name uses it)\n"
    "\n"
    "Executions choose one with `run --image NAME` or \"image\" (HTTP, MCP, client); the\n"
    "default is --default-image, else \"default\" when the store has it, else \"host\"\n"
    "(the host's /usr). The store is the host's, whatever the state directory:\n"
    "/var/lib/runbox/images as root, else $XDG_DATA_HOME/runbox/images (--images DIR).\n";

static json_t *image_json(const rbx_image_info *info)
{
    json_t *obj = api_json_of_text(rbx_image_info_to_json(info));
    return obj ? obj : json_object();
}

static void print_image(const rbx_image_info *info)
{
    char when[32];
    time_t t = (time_t)info->created_unix;
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", gmtime_r(&t, &tm));
    printf("%-20s %.19s %8llu MiB  %s  %s%s%s%s\n", info->name, info->digest,
           (unsigned long long)(info->size_bytes >> 20), when, info->source,
           info->node[0] ? ", Node.js " : "", info->node, info->is_default ? "  (default)" : "");
}

static int list(rbx_engine *engine, bool as_json)
{
    rbx_image_info *infos;
    size_t count;
    rbx_error err = {0};
    if (rbx_image_list(engine, &infos, &count, &err) != RBX_OK)
        return cli_engine_error(&err);
    json_t *array = json_array();
    for (size_t i = 0; i < count; i++) {
        if (as_json)
            json_array_append_new(array, image_json(&infos[i]));
        else
            print_image(&infos[i]);
    }
    if (!as_json && !count)
        printf("no images (executions run on the host's /usr); runbox images build default "
               "makes one\n");
    free(infos);
    if (as_json)
        return cli_print_json(array);
    json_decref(array);
    return 0;
}

typedef struct images_options {
    const char *sub, *name, *source, *packages, *from, *suite, *mirror;
    bool as_json, drop_setid;
} images_options;

/* Options with a value that only `build` takes. */
static const char *const build_options[] = {"--packages", "--from", "--suite", "--mirror", NULL};

static int parse(cli_globals *globals, int argc, char **argv, images_options *o)
{
    bool build = !strcmp(o->sub, "build"), import = !strcmp(o->sub, "import");
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        const char *const *option = build_options;
        while (*option && strcmp(arg, *option))
            option++;
        if (!strcmp(arg, "--json")) {
            o->as_json = true;
        } else if (!strcmp(arg, "--drop-setid") && import) {
            o->drop_setid = true;
        } else if (*option && build) {
            if (i + 1 >= argc || !*argv[i + 1])
                return cli_usage_error("images", "%s needs a value", arg);
            const char *value = argv[++i];
            if (!strcmp(arg, "--packages"))
                o->packages = value;
            else if (!strcmp(arg, "--from"))
                o->from = value;
            else if (!strcmp(arg, "--suite"))
                o->suite = value;
            else
                o->mirror = value;
        } else if (arg[0] != '-' && !o->name && strcmp(o->sub, "list")) {
            o->name = arg;
        } else if (arg[0] != '-' && import && !o->source) {
            o->source = arg;
        } else if ((rc = cli_global_option(argc, argv, &i, globals, "images")) == CLI_NOT_GLOBAL) {
            return cli_usage_error("images",
                                   "unexpected argument '%.64s' for '%s' (see runbox "
                                   "images --help)",
                                   arg, o->sub);
        } else if (rc) {
            return rc;
        }
    }
    if (strcmp(o->sub, "list") && !o->name)
        return cli_usage_error("images", "%s needs the image's name", o->sub);
    if (import && !o->source)
        return cli_usage_error("images", "import needs the archive or OCI layout directory to "
                                         "import: runbox images import NAME SOURCE");
    return 0;
}

int cli_images(cli_globals *globals, int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(images_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    images_options o = {.sub = argv[1]};
    if (strcmp(o.sub, "list") && strcmp(o.sub, "build") && strcmp(o.sub, "import") &&
        strcmp(o.sub, "rm"))
        return cli_usage_error("images",
                               "unknown command '%.64s' (accepted: list, build, "
                               "import, rm)",
                               o.sub);
    int rc = parse(globals, argc, argv, &o);
    if (rc)
        return rc;
    rbx_engine *engine = cli_engine(globals, &rc);
    if (!engine)
        return rc;
    rbx_error err = {0};
    rbx_image_info info;
    rbx_status status = RBX_OK;
    if (!strcmp(o.sub, "list")) {
        rc = list(engine, o.as_json);
    } else if (!strcmp(o.sub, "rm")) {
        status = rbx_image_remove(engine, o.name, &err);
        if (status == RBX_OK && !o.as_json)
            printf("removed image %s\n", o.name);
        else if (status == RBX_OK)
            rc = cli_print_json(json_pack("{s:s, s:b}", "name", o.name, "removed", true));
    } else {
        /* mmdebstrap's progress goes to stderr, so --json's stdout is one line. */
        status = !strcmp(o.sub, "build")
                     ? rbx_image_build(engine, o.name, o.packages, o.from, o.suite, o.mirror,
                                       STDERR_FILENO, &info, &err)
                     : rbx_image_import(engine, o.name, o.source, o.drop_setid, &info, &err);
        if (status == RBX_OK && o.as_json)
            rc = cli_print_json(image_json(&info));
        else if (status == RBX_OK)
            print_image(&info);
    }
    if (status != RBX_OK)
        rc = cli_engine_error(&err);
    rbx_engine_free(engine);
    return rc;
}
