/* A call's arguments checked against its tool's inputSchema, so the schema
 * a model reads is the one enforced. Only the keywords runbox's own schemas
 * use are read (type, properties, required, additionalProperties, items,
 * maxItems, exclusiveMinimum, maximum); the engine checks the rest (pattern)
 * itself.
 * Messages name the argument and what is accepted, for a model to retry. */
#include "cli/cli.h"
#include "mcp/mcp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool has_type(const json_t *value, const char *type)
{
    if (!strcmp(type, "string"))
        return json_is_string(value);
    if (!strcmp(type, "number"))
        return json_is_number(value);
    if (!strcmp(type, "integer"))
        return json_is_integer(value) ||
               (json_is_real(value) && floor(json_real_value(value)) == json_real_value(value));
    if (!strcmp(type, "boolean"))
        return json_is_boolean(value);
    if (!strcmp(type, "array"))
        return json_is_array(value);
    if (!strcmp(type, "object"))
        return json_is_object(value);
    return json_is_null(value);
}

static bool check_number(const char *name, const json_t *schema, const json_t *value, char *why,
                         size_t size)
{
    double number = json_number_value(value);
    json_t *above = json_object_get(schema, "exclusiveMinimum");
    json_t *most = json_object_get(schema, "maximum");
    if ((above && !(number > json_number_value(above))) ||
        (most && !(number <= json_number_value(most)))) {
        snprintf(why, size, "argument '%s' is %g: it must be more than %g and at most %g", name,
                 number, above ? json_number_value(above) : -INFINITY,
                 most ? json_number_value(most) : INFINITY);
        return false;
    }
    return true;
}

static bool check_value(const char *name, const json_t *schema, const json_t *value, char *why,
                        size_t size)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (type && !has_type(value, type)) {
        snprintf(why, size, "argument '%s' must be %s%s, not %s", name,
                 strchr("aeiou", type[0]) ? "an " : "a ", type, api_json_type_name(value));
        return false;
    }
    /* No runtime reads past a NUL byte, and no session id holds one. */
    if (json_is_string(value) && strlen(json_string_value(value)) != json_string_length(value)) {
        snprintf(why, size, "argument '%s' contains a NUL character (\\u0000)", name);
        return false;
    }
    if (json_is_number(value))
        return check_number(name, schema, value, why, size);
    json_t *most_items = json_object_get(schema, "maxItems");
    if (json_is_array(value) && most_items &&
        json_array_size(value) > (size_t)json_integer_value(most_items)) {
        snprintf(why, size, "argument '%s' has %zu items: at most %lld are accepted", name,
                 json_array_size(value), (long long)json_integer_value(most_items));
        return false;
    }
    json_t *items = json_object_get(schema, "items");
    size_t i;
    json_t *item;
    json_array_foreach(json_is_array(value) && items ? value : NULL, i, item)
    {
        char item_name[96];
        snprintf(item_name, sizeof item_name, "%s[%zu]", name, i);
        if (!check_value(item_name, items, item, why, size))
            return false;
    }
    return true;
}

static void list_names(const json_t *properties, char *out, size_t size)
{
    const char *key;
    json_t *value;
    size_t used = 0;
    out[0] = 0;
    json_object_foreach((json_t *)properties, key, value)
    {
        if (used < size)
            used += (size_t)snprintf(out + used, size - used, "%s%s", used ? ", " : "", key);
    }
    if (!used)
        snprintf(out, size, "none");
}

bool mcp_arguments_check(const json_t *schema, const json_t *arguments, char *why, size_t size)
{
    json_t *properties = json_object_get(schema, "properties");
    bool closed = json_is_false(json_object_get(schema, "additionalProperties"));
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)arguments, key, value)
    {
        if (closed && !json_object_get(properties, key)) {
            char names[200];
            list_names(properties, names, sizeof names);
            snprintf(why, size, "unknown argument '%.64s' (accepted: %s)", key, names);
            return false;
        }
    }
    size_t i;
    json_t *required;
    json_array_foreach(json_object_get(schema, "required"), i, required)
    {
        if (!json_object_get(arguments, json_string_value(required))) {
            snprintf(why, size, "missing required argument '%s'", json_string_value(required));
            return false;
        }
    }
    json_object_foreach((json_t *)arguments, key, value)
    {
        json_t *property = json_object_get(properties, key);
        if (property && !check_value(key, property, value, why, size))
            return false;
    }
    return true;
}
