/* The tools, named as agents' code-execution APIs name them, and described
 * for the model that calls them: what runs, what persists in a session,
 * and the limits, which are read from the engine's configuration. */
#include "mcp/mcp.h"

#include <stdio.h>
#include <string.h>

#define SCHEMA_DIALECT "https://json-schema.org/draft/2020-12/schema"
#define SESSION_ID_PATTERN "^" RBX_SESSION_ID_PATTERN "$" /* anchored, as JSON Schema wants */

typedef struct tool_spec {
    mcp_tool tool;
    const char *title;
    const char *summary;           /* the description's first paragraph */
    const char *code_text;         /* executions: the code argument */
    const char *requirements_text; /* executions that install packages */
} tool_spec;

static const tool_spec specs[] = {
    {{"execute_python", MCP_TOOL_EXECUTE, "python", "code"},
     "Run Python code",
     "Run Python 3 code in an isolated sandbox and get back its stdout (output), stderr (error), "
     "exit_code and, when it failed, a classified error_type (SyntaxError, TimeoutError, "
     "MemoryError, ImportError, PermissionError, RuntimeError) and the exception's own name "
     "(exception, e.g. ZeroDivisionError). matplotlib figures shown or left open come back "
     "as images; with stateful, also the last expression's value and display(obj). Code "
     "with a syntax error does not run at all.",
     "The Python program to run (any number of lines).",
     "Packages to install before the code runs, as pip requirement specifiers, e.g. "
     "[\"requests\", \"pandas>=2\"]."},
    {{"execute_javascript", MCP_TOOL_EXECUTE, "javascript", "code"},
     "Run JavaScript code",
     "Run JavaScript with Node.js in an isolated sandbox and get back its stdout (output), "
     "stderr (error), exit_code and, when it failed, a classified error_type (SyntaxError, "
     "TimeoutError, MemoryError, ImportError, PermissionError, RuntimeError) and the error's "
     "own name (exception, e.g. TypeError). Code runs as CommonJS (require works); code with "
     "import or export statements or top-level await runs as an ES module. Use console.log to "
     "show values. Code with a syntax error does not run at all.",
     "The JavaScript program to run (any number of lines).",
     "Packages to install before the code runs, as npm package specs, e.g. "
     "[\"lodash\", \"dayjs@1.11.10\"]."},
    {{"execute_typescript", MCP_TOOL_EXECUTE, "typescript", "code"},
     "Run TypeScript code",
     "Run TypeScript with Node.js in an isolated sandbox: its types are stripped, not checked, "
     "and it then runs as JavaScript does (CommonJS, or an ES module with import, export or "
     "top-level await). You get back its stdout (output), stderr (error), exit_code and, when it "
     "failed, a classified error_type (SyntaxError, TimeoutError, MemoryError, ImportError, "
     "PermissionError, RuntimeError). Syntax that needs a compiler rather than stripping (enum, "
     "namespace, parameter properties) is a SyntaxError: use a union of literals or an object "
     "instead. Code with a syntax error does not run at all.",
     "The TypeScript program to run (any number of lines).",
     "Packages to install before the code runs, as npm package specs, e.g. "
     "[\"zod\", \"dayjs@1.11.10\"]."},
    {{"execute_bash", MCP_TOOL_EXECUTE, "bash", "command"},
     "Run a Bash command",
     "Run a Bash script in an isolated sandbox (Debian userland, no root, no sudo) and get back "
     "its stdout (output), stderr (error) and exit_code; a failure is classified in error_type "
     "(exit 127, command not found: ImportError; TimeoutError; PermissionError; RuntimeError). "
     "A script with a syntax error does not run at all.",
     "The Bash script to run (any number of lines).",
     NULL},
    {{"list_sessions", MCP_TOOL_LIST_SESSIONS, NULL, NULL},
     "List sessions",
     "List the sessions that exist: their ids, when they were created and last used (Unix "
     "seconds), the disk space their files take, and whether code runs in them now.",
     NULL,
     NULL},
    {{"close_session", MCP_TOOL_CLOSE_SESSION, NULL, NULL},
     "Close a session",
     "Delete a session and every file in it. Code still running in the session is stopped "
     "first (its call returns with cancelled: true). A later call with the same session_id "
     "starts over in an empty directory.",
     NULL,
     NULL},
};

#define SPEC_COUNT (sizeof specs / sizeof specs[0])

const mcp_tool *mcp_tool_find(const char *name)
{
    for (size_t i = 0; i < SPEC_COUNT; i++)
        if (!strcmp(specs[i].tool.name, name))
            return &specs[i].tool;
    return NULL;
}

static json_t *property(const char *type, const char *description)
{
    return json_pack("{s:s, s:s}", "type", type, "description", description);
}

static json_t *nullable_property(const char *type, const char *description)
{
    return json_pack("{s:[s,s], s:s}", "type", type, "null", "description", description);
}

static json_t *object_schema(json_t *properties, json_t *required)
{
    return json_pack("{s:s, s:s, s:o, s:o}", "$schema", SCHEMA_DIALECT, "type", "object",
                     "properties", properties, "required", required);
}

static void size_text(size_t bytes, char *out, size_t size)
{
    if (bytes % (1u << 20) == 0)
        snprintf(out, size, "%zu MiB", bytes >> 20);
    else
        snprintf(out, size, "%zu KiB", bytes >> 10);
}

/* The two paragraphs every execution tool's description ends with. */
static void sessions_and_limits(const rbx_config *config, char *out, size_t size)
{
    char cap[32];
    size_text(config->output_cap_bytes, cap, sizeof cap);
    snprintf(out, size,
             "\n\nSessions: code runs in /home/user, its working directory and HOME. Pass the "
             "same session_id (a name you choose) to keep files there between calls of any "
             "execute tool. Without stateful, only files persist: every call starts a fresh "
             "process. With stateful: true, calls of one language in one session share a live "
             "interpreter: variables, imports, functions and the working directory persist "
             "(bash: cd, exported variables, functions, aliases), the value of a last "
             "expression comes back in results, and plots and tables come back as images "
             "and HTML. A stateful call without session_id starts a new session: reuse the "
             "session_id of its result. Without session_id a stateless call gets an empty "
             "directory that is deleted afterwards. close_session deletes a session."
             "\n\nLimits: a call is stopped after %g s (pass timeout for up to %g s), and every "
             "process it started is killed then. Memory: %u MiB. Output: %s per stream (stdout, "
             "stderr); past that the head and the tail are kept around a marker line. Network "
             "access: %s.",
             config->default_timeout_s, config->max_timeout_s, (unsigned)config->memory_mb, cap,
             config->network_off ? "off (loopback only)" : "on");
}

/* The operator's policy may come from a file: the text does not guess it. */
static json_t *egress_allow_input(void)
{
    char text[512];
    snprintf(text, sizeof text,
             "Only these destinations may be reached, and only where the operator's policy "
             "allows them: CIDRs (\"10.0.0.0/8\"), addresses and domain names (\"pypi.org\", "
             "\"*.example.com\"), at most %d; [] reaches nothing. Leave it out for the "
             "operator's policy as it is.",
             RBX_EGRESS_ALLOW_MAX);
    return json_pack("{s:s, s:{s:s}, s:i, s:s}", "type", "array", "items", "type", "string",
                     "maxItems", RBX_EGRESS_ALLOW_MAX, "description", text);
}

static json_t *execution_input(const tool_spec *spec, const rbx_config *config)
{
    char text[512];
    json_t *properties = json_object();
    json_object_set_new(properties, spec->tool.code_argument, property("string", spec->code_text));
    snprintf(text, sizeof text,
             "Seconds before the execution is stopped and all its processes killed (default "
             "%g, at most %g).",
             config->default_timeout_s, config->max_timeout_s);
    json_object_set_new(properties, "timeout",
                        json_pack("{s:s, s:f, s:f, s:f, s:s}", "type", "number", "exclusiveMinimum",
                                  0.0, "maximum", config->max_timeout_s, "default",
                                  config->default_timeout_s, "description", text));
    json_object_set_new(
        properties, "session_id",
        json_pack("{s:s, s:s, s:s}", "type", "string", "pattern", SESSION_ID_PATTERN, "description",
                  "Run in this session, created on first use: files in /home/user persist "
                  "across calls with the same id. Letters, digits, '.', '_' and '-', up to 64."));
    snprintf(text, sizeof text,
             "CPU cores the code may use at once (default %g, at most %g); more than 1 only "
             "helps code that runs in parallel.",
             config->cpus, config->max_cpus);
    json_object_set_new(properties, "cpus",
                        json_pack("{s:s, s:f, s:f, s:s}", "type", "number", "exclusiveMinimum", 0.0,
                                  "maximum", config->max_cpus, "description", text));
    json_object_set_new(
        properties, "stateful",
        json_pack("{s:s, s:s}", "type", "boolean", "description",
                  "Run in the session's live interpreter, which keeps variables, imports and "
                  "the working directory from one stateful call to the next (default false: a "
                  "fresh process every call)."));
    if (spec->requirements_text) {
        snprintf(text, sizeof text,
                 "%s Installed once into a cached environment that later calls with the same "
                 "packages reuse; the first such call waits for the install.",
                 spec->requirements_text);
        json_object_set_new(properties, "requirements",
                            json_pack("{s:s, s:{s:s}, s:s}", "type", "array", "items", "type",
                                      "string", "description", text));
    }
    json_object_set_new(properties, "egress_allow", egress_allow_input());
    json_object_set_new(
        properties, "image",
        json_pack("{s:s, s:s, s:s}", "type", "string", "pattern", "^[a-z0-9][a-z0-9._-]{0,62}$",
                  "description",
                  "The root image to run on, by name (the operator's images; \"host\" is the "
                  "host's own system). Default: the operator's default image."));
    json_t *schema = object_schema(properties, json_pack("[s]", spec->tool.code_argument));
    json_object_set_new(schema, "additionalProperties", json_false());
    return schema;
}

/* What rbx_result_to_json renders, field by field. */
static const struct result_field {
    const char *name, *type;
    bool nullable;
    const char *description;
} result_fields[] = {
    {"success", "boolean", false, "Exit code 0, and not timed out, killed or cancelled."},
    {"output", "string", false, "What the code wrote to stdout (UTF-8)."},
    {"error", "string", false, "What the code wrote to stderr, plus runbox's own notes."},
    {"exit_code", "integer", false,
     "The exit code; 128+N when killed by signal N, 124 on timeout."},
    {"duration_ms", "integer", false, "Wall time of the execution."},
    {"session_id", "string", false,
     "The session it ran in (a fresh one, now deleted, when none "
     "was given)."},
    {"language", "string", true, "python, javascript, typescript or bash."},
    {"image", "string", false, "The root image it ran on (\"host\": the host's own system)."},
    {"image_note", "string", true,
     "Why it ran on the host's own system although no image was asked for (the image store "
     "has no default image), or null."},
    {"error_type", "string", true,
     "null on success, else SyntaxError, TimeoutError, MemoryError, "
     "ImportError, PermissionError or RuntimeError."},
    {"exception", "string", true, "The language's own error name (ZeroDivisionError), or null."},
    {"timed_out", "boolean", false, "Stopped at the timeout."},
    {"cancelled", "boolean", false, "Stopped because the call was cancelled."},
    {"truncated", "object", false, "Bytes left out of the middle of stdout and of stderr."},
    {"signal", "integer", true, "The signal that ended the program, or null."},
    {"cpu_ms", "integer", false, "CPU time used."},
    {"peak_memory_kb", "integer", false, "Peak memory used."},
    {"limits", "string", true, "What enforced the limits: cgroup-v2, cgroup-v1 or rlimits."},
    {"cpus", "number", true, "The CPU quota enforced, in cores (null where none could be)."},
    {"stateful", "boolean", false, "The call ran in the session's live interpreter."},
    {"results", "array", false,
     "Rich outputs: {kind: execute_result (a stateful call's last expression's value) or "
     "display_data (display(obj), a matplotlib figure), data: {MIME type: content}}; images "
     "are base64."},
    {"execution_count", "integer", true, "Calls the session's interpreter has run (stateful)."},
    {"kernel_restarted", "boolean", false,
     "The session's interpreter had to start afresh (it died, ran out of memory, ignored an "
     "interrupt, or sat idle too long where it could not hibernate): variables from earlier "
     "calls are gone."},
    {"kernel_restored", "boolean", false,
     "The session's interpreter had hibernated (checkpointed to disk while idle) and was "
     "restored for this call, with its variables as they were."},
    {"restore_ms", "integer", true, "How long that restore took (null unless restored)."},
    {"restart_reason", "string", true,
     "Why the interpreter started afresh, where runbox knows (null unless kernel_restarted)."},
    {"network", "boolean", false, "Whether the code could reach outside hosts."},
    {"egress_denied", "integer", false,
     "Connection attempts the egress policy refused (0 with the network off)."},
    {"egress_denied_to", "array", false,
     "The first few destinations refused: \"ADDR:PORT\", \"[V6]:PORT\", or a domain name "
     "that was not resolved."},
    {"pooled", "boolean", false,
     "The execution ran in a sandbox prepared in advance (faster; otherwise exactly like a "
     "cold start)."},
};

static json_t *truncated_schema(const char *description)
{
    json_t *schema =
        json_pack("{s:s, s:s, s:{s:{s:s, s:i}, s:{s:s, s:i}, s:{s:s, s:i}}, s:[s,s]}", "type",
                  "object", "description", description, "properties", "stdout", "type", "integer",
                  "minimum", 0, "stderr", "type", "integer", "minimum", 0, "results", "type",
                  "integer", "minimum", 0, "required", "stdout", "stderr");
    return schema;
}

/* Present when the call had requirements; newer engines render it. */
static json_t *install_schema(void)
{
    return json_pack("{s:[s,s], s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}}}", "type", "object", "null",
                     "description",
                     "The cached environment that held the requirements, or null without them.",
                     "properties", "environment", "type", "string", "reused", "type", "boolean",
                     "duration_ms", "type", "integer");
}

static json_t *result_schema(void)
{
    json_t *properties = json_object(), *required = json_array();
    for (size_t i = 0; i < sizeof result_fields / sizeof result_fields[0]; i++) {
        const struct result_field *field = &result_fields[i];
        json_t *schema = !strcmp(field->type, "object") ? truncated_schema(field->description)
                         : field->nullable ? nullable_property(field->type, field->description)
                                           : property(field->type, field->description);
        json_object_set_new(properties, field->name, schema);
        json_array_append_new(required, json_string(field->name));
    }
    json_object_set_new(properties, "install", install_schema());
    return object_schema(properties, required);
}

static json_t *sessions_output(void)
{
    json_t *session =
        json_pack("{s:s, s:{s:o, s:o, s:o, s:o, s:o}, s:[s,s,s,s,s]}", "type", "object",
                  "properties", "session_id", property("string", "The session's id."), "created",
                  property("integer", "When it was created (Unix seconds)."), "last_used",
                  property("integer", "When code last ran in it (Unix seconds)."), "disk_bytes",
                  property("integer", "Disk space its files take."), "running",
                  property("boolean", "Whether code runs in it now."), "required", "session_id",
                  "created", "last_used", "disk_bytes", "running");
    json_object_set_new(
        json_object_get(session, "properties"), "kernels",
        json_pack("{s:s, s:s, s:{s:s}}", "type", "array", "description",
                  "Its live interpreters (stateful calls): language, state (busy or idle), "
                  "owner_pid, started, idle_s, memory_bytes.",
                  "items", "type", "object"));
    return object_schema(json_pack("{s:{s:s, s:o}}", "sessions", "type", "array", "items", session),
                         json_pack("[s]", "sessions"));
}

static json_t *close_output(void)
{
    return object_schema(json_pack("{s:o, s:o}", "session_id",
                                   property("string", "The session closed."), "closed",
                                   property("boolean", "Always true: its files are gone.")),
                         json_pack("[s,s]", "session_id", "closed"));
}

static json_t *session_input(bool with_id)
{
    json_t *properties = json_object();
    if (with_id)
        json_object_set_new(properties, "session_id",
                            json_pack("{s:s, s:s, s:s}", "type", "string", "pattern",
                                      SESSION_ID_PATTERN, "description",
                                      "The session to delete, as given to the execute tools."));
    json_t *schema =
        object_schema(properties, with_id ? json_pack("[s]", "session_id") : json_array());
    json_object_set_new(schema, "additionalProperties", json_false());
    return schema;
}

/* Hints for hosts deciding what to confirm with the user. Code can delete
 * files in its session and, with the network on, reach the world. */
static json_t *annotations(const tool_spec *spec, const rbx_config *config)
{
    bool execute = spec->tool.kind == MCP_TOOL_EXECUTE;
    bool list = spec->tool.kind == MCP_TOOL_LIST_SESSIONS;
    return json_pack("{s:s, s:b, s:b, s:b, s:b}", "title", spec->title, "readOnlyHint", list,
                     "destructiveHint", !list, "idempotentHint", !execute, "openWorldHint",
                     execute && !config->network_off);
}

static json_t *describe(const tool_spec *spec, const rbx_config *config)
{
    char description[4096];
    json_t *input, *output;
    if (spec->tool.kind == MCP_TOOL_EXECUTE) {
        size_t used = (size_t)snprintf(description, sizeof description, "%s", spec->summary);
        sessions_and_limits(config, description + used, sizeof description - used);
        input = execution_input(spec, config);
        output = result_schema();
    } else {
        snprintf(description, sizeof description, "%s", spec->summary);
        bool list = spec->tool.kind == MCP_TOOL_LIST_SESSIONS;
        input = session_input(!list);
        output = list ? sessions_output() : close_output();
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "name", spec->tool.name, "title",
                     spec->title, "description", description, "inputSchema", input, "outputSchema",
                     output, "annotations", annotations(spec, config));
}

json_t *mcp_tools_describe(const rbx_config *config)
{
    json_t *tools = json_array();
    for (size_t i = 0; i < SPEC_COUNT; i++) {
        json_t *tool = describe(&specs[i], config);
        if (!tool || json_array_append_new(tools, tool) != 0) {
            json_decref(tools);
            return NULL;
        }
    }
    return tools;
}
