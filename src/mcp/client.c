/* The client as a receiver of notifications: the resources it subscribed
 * to with resources/subscribe (MCP 2025-06-18, 2025-11-25), the
 * subscriptions/listen streams it opened (MCP 2026-07-28, where listen
 * replaces subscribe: each stream is a request left open, acknowledged
 * first, whose notifications carry its id in _meta and which ends with
 * notifications/cancelled from the client or a result from the server),
 * and its log level. The reader thread changes it, tool-call workers read
 * it: one lock. Clients are found by their output (a small registry), as
 * a worker knows only the output it answers on. */
#include "mcp/mcp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUBSCRIPTION_ID_KEY "io.modelcontextprotocol/subscriptionId"

typedef struct listen_stream {
    json_t *id;
    json_t *uris; /* object: URI -> true */
    bool list_changed;
} listen_stream;

struct mcp_client {
    mcp_output *output;
    pthread_mutex_t lock;
    const char *version; /* the negotiated revision (static), NULL before initialize */
    json_t *subscribed;  /* object: URI -> true, from resources/subscribe */
    atomic_bool listed;  /* it asked for resources/list: the list's changes concern it */
    listen_stream streams[MCP_LISTEN_MAX];
    size_t stream_count;
    mcp_log_level log_level;
    mcp_client *next; /* in the registry */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mcp_client *registry;

mcp_client *mcp_client_start(mcp_output *output)
{
    mcp_client *client = calloc(1, sizeof *client);
    if (!client || !(client->subscribed = json_object())) {
        free(client);
        return NULL;
    }
    client->output = output;
    client->log_level = MCP_LOG_OFF;
    pthread_mutex_init(&client->lock, NULL);
    pthread_mutex_lock(&registry_lock);
    client->next = registry;
    registry = client;
    pthread_mutex_unlock(&registry_lock);
    return client;
}

mcp_client *mcp_client_of(mcp_output *output)
{
    pthread_mutex_lock(&registry_lock);
    mcp_client *client = registry;
    while (client && client->output != output)
        client = client->next;
    pthread_mutex_unlock(&registry_lock);
    return client;
}

static json_t *stream_meta(const json_t *id)
{
    return json_pack("{s:O}", SUBSCRIPTION_ID_KEY, id);
}

void mcp_client_stop(mcp_client *client)
{
    if (!client)
        return;
    pthread_mutex_lock(&registry_lock);
    for (mcp_client **at = &registry; *at; at = &(*at)->next)
        if (*at == client) {
            *at = client->next;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    /* A graceful end of each listen stream: its result, with its id. */
    for (size_t i = 0; i < client->stream_count; i++) {
        listen_stream *stream = &client->streams[i];
        json_t *result = json_pack("{s:o, s:s}", "_meta", stream_meta(stream->id), "resultType",
                                   "complete");
        rpc_reply(client->output, stream->id, result);
        json_decref(stream->id);
        json_decref(stream->uris);
    }
    json_decref(client->subscribed);
    pthread_mutex_destroy(&client->lock);
    free(client);
}

void mcp_client_set_version(mcp_client *client, const char *version)
{
    if (!client)
        return;
    pthread_mutex_lock(&client->lock);
    client->version = version;
    pthread_mutex_unlock(&client->lock);
}

bool mcp_client_takes_links(mcp_client *client)
{
    if (!client)
        return false;
    pthread_mutex_lock(&client->lock);
    bool takes = client->version && strcmp(client->version, "2025-06-18") >= 0;
    pthread_mutex_unlock(&client->lock);
    return takes;
}

void mcp_client_set_listed(mcp_client *client)
{
    if (client)
        atomic_store(&client->listed, true);
}

void mcp_client_set_log_level(mcp_client *client, mcp_log_level level)
{
    pthread_mutex_lock(&client->lock);
    client->log_level = level;
    pthread_mutex_unlock(&client->lock);
}

mcp_log_level mcp_client_log_level(mcp_client *client)
{
    if (!client)
        return MCP_LOG_OFF;
    pthread_mutex_lock(&client->lock);
    mcp_log_level level = client->log_level;
    pthread_mutex_unlock(&client->lock);
    return level;
}

/* A URI as subscriptions hold it: runbox's own re-encoded, so that a
 * client's spelling (%41 for A) matches the URIs changes are reported
 * under; another scheme's as sent (it never changes). NULL: refused. */
static char *subscription_key(const char *uri, char *why, size_t why_size)
{
    if (strlen(uri) > MCP_URI_MAX) {
        snprintf(why, why_size, "the URI is longer than %d bytes", MCP_URI_MAX);
        return NULL;
    }
    char id[RBX_SESSION_ID_MAX + 1], path[MCP_URI_MAX + 1];
    switch (mcp_resource_uri_parse(uri, id, path, sizeof path, why, why_size)) {
    case MCP_URI_FILE:
        return mcp_resource_uri(id, path);
    case MCP_URI_FOREIGN:
        return strdup(uri);
    case MCP_URI_INVALID:
        break;
    }
    return NULL;
}

bool mcp_client_subscribe(mcp_client *client, const char *uri, char *why, size_t why_size)
{
    char *key = subscription_key(uri, why, why_size);
    if (!key)
        return false;
    pthread_mutex_lock(&client->lock);
    bool room = json_object_get(client->subscribed, key) ||
                json_object_size(client->subscribed) < MCP_SUBSCRIPTIONS_MAX;
    if (room)
        json_object_set_new(client->subscribed, key, json_true());
    pthread_mutex_unlock(&client->lock);
    if (!room)
        snprintf(why, why_size,
                 "this client already subscribed to %d resources: unsubscribe from some first",
                 MCP_SUBSCRIPTIONS_MAX);
    free(key);
    return room;
}

void mcp_client_unsubscribe(mcp_client *client, const char *uri)
{
    char why[200];
    char *key = client ? subscription_key(uri, why, sizeof why) : NULL;
    if (!key)
        return;
    pthread_mutex_lock(&client->lock);
    json_object_del(client->subscribed, key);
    pthread_mutex_unlock(&client->lock);
    free(key);
}

static listen_stream *find_stream(mcp_client *client, const json_t *id)
{
    for (size_t i = 0; i < client->stream_count; i++)
        if (json_equal(client->streams[i].id, id))
            return &client->streams[i];
    return NULL;
}

/* The honored part of a SubscriptionFilter: resource subscriptions and
 * resourcesListChanged (runbox's tools and prompts never change). */
static bool read_filter(const json_t *filter, json_t *uris, bool *list_changed, char *why,
                        size_t why_size)
{
    json_t *wanted = json_object_get(filter, "resourceSubscriptions");
    json_t *changed = json_object_get(filter, "resourcesListChanged");
    if (!json_is_object(filter) || (wanted && !json_is_array(wanted)) ||
        (changed && !json_is_boolean(changed))) {
        snprintf(why, why_size,
                 "\"notifications\" must be an object whose \"resourceSubscriptions\" is an array "
                 "of URIs and \"resourcesListChanged\" a boolean");
        return false;
    }
    if (json_array_size(wanted) > MCP_SUBSCRIPTIONS_MAX) {
        snprintf(why, why_size, "at most %d resourceSubscriptions per stream",
                 MCP_SUBSCRIPTIONS_MAX);
        return false;
    }
    size_t i;
    json_t *uri;
    json_array_foreach(wanted, i, uri)
    {
        char *key = json_is_string(uri) ? subscription_key(json_string_value(uri), why, why_size)
                                        : NULL;
        if (!key) {
            if (!json_is_string(uri))
                snprintf(why, why_size, "resourceSubscriptions[%zu] must be a string", i);
            return false;
        }
        json_object_set_new(uris, key, json_true());
        free(key);
    }
    *list_changed = json_is_true(changed);
    return true;
}

static json_t *honored_filter(const listen_stream *stream)
{
    json_t *filter = json_object();
    if (json_object_size(stream->uris)) {
        json_t *list = json_array();
        const char *key;
        json_t *value;
        json_object_foreach(stream->uris, key, value)
        {
            json_array_append_new(list, json_string(key));
        }
        json_object_set_new(filter, "resourceSubscriptions", list);
    }
    if (stream->list_changed)
        json_object_set_new(filter, "resourcesListChanged", json_true());
    return filter;
}

void mcp_client_listen(mcp_client *client, json_t *id, const json_t *filter)
{
    char why[300];
    json_t *uris = json_object();
    bool list_changed = false;
    if (!read_filter(filter, uris, &list_changed, why, sizeof why)) {
        json_decref(uris);
        rpc_fail(client->output, id, RPC_INVALID_PARAMS, "Invalid params: %s", why);
        return;
    }
    pthread_mutex_lock(&client->lock);
    int refusal = find_stream(client, id) ? 1 : client->stream_count >= MCP_LISTEN_MAX ? 2 : 0;
    if (!refusal) {
        listen_stream *stream = &client->streams[client->stream_count++];
        *stream = (listen_stream){.id = json_incref(id), .uris = uris, .list_changed = list_changed};
        /* Sent under the lock: no notification of this stream can come first. */
        json_t *params = json_pack("{s:o, s:o}", "notifications", honored_filter(stream), "_meta",
                                   stream_meta(id));
        mcp_output_send(client->output,
                        rpc_notification("notifications/subscriptions/acknowledged", params));
    }
    pthread_mutex_unlock(&client->lock);
    if (refusal) {
        json_decref(uris);
        if (refusal == 1)
            rpc_fail(client->output, id, RPC_INVALID_REQUEST,
                     "Invalid Request: a listen stream with this id is open");
        else
            rpc_fail(client->output, id, RPC_INTERNAL_ERROR,
                     "Subscription limit reached: %d listen streams are open; cancel one first",
                     MCP_LISTEN_MAX);
    }
}

void mcp_client_cancel(mcp_client *client, const json_t *request_id)
{
    if (!client)
        return;
    pthread_mutex_lock(&client->lock);
    listen_stream *stream = find_stream(client, request_id);
    if (stream) {
        json_decref(stream->id);
        json_decref(stream->uris);
        *stream = client->streams[--client->stream_count];
    }
    pthread_mutex_unlock(&client->lock);
}

static bool stateless(const mcp_client *client)
{
    return client->version && !strcmp(client->version, MCP_STATELESS_VERSION);
}

void mcp_client_notify_peers(mcp_client *client, const json_t *changed_uris, bool list_changed)
{
    if (!client)
        return;
    pthread_mutex_lock(&client->lock);
    bool peers = stateless(client);
    pthread_mutex_unlock(&client->lock);
    if (!peers || (!json_array_size(changed_uris) && !list_changed))
        return;
    /* Held while they are told, so that none is freed meanwhile; nothing
     * that holds a client's or a transport's lock takes this one. */
    pthread_mutex_lock(&registry_lock);
    for (mcp_client *peer = registry; peer; peer = peer->next) {
        if (peer == client)
            continue;
        pthread_mutex_lock(&peer->lock);
        bool listening = stateless(peer) && peer->stream_count;
        pthread_mutex_unlock(&peer->lock);
        if (listening)
            mcp_client_notify(peer, changed_uris, list_changed);
    }
    pthread_mutex_unlock(&registry_lock);
}

static bool any_key_below(const json_t *uris, const char *prefix)
{
    const char *key;
    json_t *value;
    size_t len = strlen(prefix);
    json_object_foreach((json_t *)uris, key, value)
    {
        if (!strncmp(key, prefix, len))
            return true;
    }
    return false;
}

/* Whether the client would be told of a change below prefix (a session's
 * URIs): mcp_client_notify's cases; the caller holds its lock. */
static bool would_be_told(const mcp_client *client, const char *prefix)
{
    if (!client->version)
        return false;
    bool legacy = strcmp(client->version, "2026-07-28") < 0;
    if (legacy && (atomic_load(&client->listed) || any_key_below(client->subscribed, prefix)))
        return true;
    for (size_t s = 0; s < client->stream_count; s++)
        if (client->streams[s].list_changed || any_key_below(client->streams[s].uris, prefix))
            return true;
    return false;
}

static bool told_of(mcp_client *client, const char *prefix)
{
    pthread_mutex_lock(&client->lock);
    bool told = would_be_told(client, prefix);
    pthread_mutex_unlock(&client->lock);
    return told;
}

bool mcp_client_watches(mcp_client *client, const char *session_id)
{
    char *prefix = client ? mcp_resource_uri(session_id, "") : NULL;
    if (!prefix) /* no client, or out of memory: a listing more, not a change missed */
        return client != NULL;
    bool watched = told_of(client, prefix);
    pthread_mutex_lock(&client->lock);
    bool peers = stateless(client);
    pthread_mutex_unlock(&client->lock);
    if (!watched && peers) {
        pthread_mutex_lock(&registry_lock);
        for (mcp_client *peer = registry; peer && !watched; peer = peer->next) {
            if (peer == client)
                continue;
            pthread_mutex_lock(&peer->lock);
            bool listening = stateless(peer) && peer->stream_count;
            pthread_mutex_unlock(&peer->lock);
            watched = listening && told_of(peer, prefix);
        }
        pthread_mutex_unlock(&registry_lock);
    }
    free(prefix);
    return watched;
}

static json_t *updated(const char *uri, const json_t *stream_id)
{
    json_t *params = json_pack("{s:s}", "uri", uri);
    if (stream_id)
        json_object_set_new(params, "_meta", stream_meta(stream_id));
    return rpc_notification("notifications/resources/updated", params);
}

void mcp_client_notify(mcp_client *client, const json_t *changed_uris, bool list_changed)
{
    if (!client)
        return;
    pthread_mutex_lock(&client->lock);
    /* Notifications before initialize would break the lifecycle. */
    bool ready = client->version != NULL;
    /* From 2026-07-28 on, changes are told only on listen streams. */
    bool legacy = ready && strcmp(client->version, "2026-07-28") < 0;
    size_t i;
    json_t *uri;
    json_array_foreach(ready ? changed_uris : NULL, i, uri)
    {
        const char *text = json_string_value(uri);
        if (legacy && json_object_get(client->subscribed, text))
            mcp_output_send(client->output, updated(text, NULL));
        for (size_t s = 0; s < client->stream_count; s++)
            if (json_object_get(client->streams[s].uris, text))
                mcp_output_send(client->output, updated(text, client->streams[s].id));
    }
    if (ready && list_changed) {
        if (legacy && atomic_load(&client->listed))
            mcp_output_send(client->output,
                            rpc_notification("notifications/resources/list_changed", json_object()));
        for (size_t s = 0; s < client->stream_count; s++)
            if (client->streams[s].list_changed)
                mcp_output_send(client->output,
                                rpc_notification("notifications/resources/list_changed",
                                                 json_pack("{s:o}", "_meta",
                                                           stream_meta(client->streams[s].id))));
    }
    pthread_mutex_unlock(&client->lock);
}
