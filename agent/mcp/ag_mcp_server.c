#include "agent/mcp/ag_mcp_server.h"

#include "agent/mcp/ag_mcp_rpc.h"
#include "common/log.h"
#include "common/version.h"
#include "common/xalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct ag_mcp_server {
    const ag_mcp_config_t *cfg; /* borrowed */
    ag_mcp_box_t *box;          /* owned */
    const char *version;        /* negotiated (static), NULL before */
    bool initialized;           /* notifications/initialized arrived */
    char level[16];             /* logging/setLevel */
    pthread_mutex_t lock;       /* guards running */
    json_t *running;            /* owned copy of the running request's id */
    atomic_bool cancel;         /* the running request was cancelled */
};

/* MCP log levels, least severe first (RFC 5424 names). */
static const char *const s_levels[] = {"debug",   "info",     "notice",
                                       "warning", "error",    "critical",
                                       "alert",   "emergency"};

typedef struct s_call_ctx {
    ag_mcp_server_t *s;
    const ag_mcp_io_t *io;
    json_t *token; /* progressToken (borrowed) or NULL */
    double n;      /* progress so far */
} s_call_ctx_t;

ag_mcp_server_t *
ag_mcp_server_new(const ag_mcp_config_t *cfg)
{
    ag_mcp_server_t *s = xcalloc(1, sizeof *s);
    s->cfg = cfg;
    s->box = ag_mcp_box_new(cfg);
    snprintf(s->level, sizeof s->level, "info");
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->cancel, false);
    return s;
}

static void
s_server_free(ag_mcp_server_t **p, bool hand_off)
{
    if (!p || !*p)
        return;
    ag_mcp_server_t *s = *p;
    if (hand_off)
        ag_mcp_box_hand_off(&s->box);
    else
        ag_mcp_box_destroy(&s->box);
    json_decref(s->running);
    pthread_mutex_destroy(&s->lock);
    free(s);
    *p = NULL;
}

void
ag_mcp_server_destroy(ag_mcp_server_t **p)
{
    s_server_free(p, false);
}

void
ag_mcp_server_hand_off(ag_mcp_server_t **p)
{
    s_server_free(p, true);
}

const char *
ag_mcp_server_version(ag_mcp_server_t *s)
{
    return s->version;
}

ag_mcp_box_t *
ag_mcp_server_box(ag_mcp_server_t *s)
{
    return s->box;
}

void
ag_mcp_server_cancel(ag_mcp_server_t *s, const json_t *id)
{
    pthread_mutex_lock(&s->lock);
    if (s->running && (!id || json_equal(s->running, (json_t *)id)))
        atomic_store(&s->cancel, true);
    pthread_mutex_unlock(&s->lock);
}

/* ---- tools/call hooks ------------------------------------------------- */

static void
s_progress(void *arg, const char *line)
{
    s_call_ctx_t *c = arg;
    c->n += 1;
    json_t *n = ag_mcp_notification(
        "notifications/progress",
        json_pack("{s:O, s:f, s:s}", "progressToken", c->token, "progress",
                  c->n, "message", line));
    c->io->send(c->io->arg, n);
    json_decref(n);
}

/* notifications/message when `level` is at least the client's level. */
static void
s_log(void *arg, const char *level, const char *text)
{
    s_call_ctx_t *c = arg;
    int want = 0, have = 0;
    for (int i = 0; i < 8; i++) {
        if (strcmp(s_levels[i], c->s->level) == 0)
            want = i;
        if (strcmp(s_levels[i], level) == 0)
            have = i;
    }
    if (have < want || !c->io || !c->io->send)
        return;
    json_t *n =
        ag_mcp_notification("notifications/message",
                            json_pack("{s:s, s:s, s:s}", "level", level,
                                      "logger", "jupyter-agent", "data", text));
    c->io->send(c->io->arg, n);
    json_decref(n);
}

static bool
s_should_stop(void *arg)
{
    s_call_ctx_t *c = arg;
    if (c->io && c->io->pump)
        c->io->pump(c->io->arg);
    return atomic_load(&c->s->cancel);
}

/* ---- methods ---------------------------------------------------------- */

static json_t *
s_initialize(ag_mcp_server_t *s, const json_t *id, const json_t *params)
{
    const char *asked =
        json_string_value(json_object_get(params, "protocolVersion"));
    if (!asked)
        return ag_mcp_error(id, AG_MCP_INVALID_PARAMS,
                            "initialize needs params.protocolVersion (a "
                            "string such as \"%s\")",
                            AG_MCP_LATEST_VERSION);
    if (s->version)
        return ag_mcp_error(id, AG_MCP_INVALID_REQUEST,
                            "this session is already initialized (revision "
                            "%s); start a new session to initialize again",
                            s->version);
    s->version = ag_mcp_negotiate(asked);
    const json_t *ci = json_object_get(params, "clientInfo");
    log_info("mcp: initialize from %s %s, revision %s (asked %s)",
             json_string_value(json_object_get(ci, "name"))
                 ? json_string_value(json_object_get(ci, "name"))
                 : "a client",
             json_string_value(json_object_get(ci, "version"))
                 ? json_string_value(json_object_get(ci, "version"))
                 : "",
             s->version, asked);
    char *instructions = ag_mcp_instructions(s->cfg);
    json_t *r = json_pack("{s:s, s:{s:{s:b}, s:{}}, s:{s:s, s:s, s:s}, s:s}",
                          "protocolVersion", s->version, "capabilities",
                          "tools", "listChanged", 0, "logging", "serverInfo",
                          "name", "jupyter-agent", "title",
                          "jupyter-agent (sandboxed Python)", "version",
                          JUPYTER_AGENT_VERSION, "instructions", instructions);
    free(instructions);
    return ag_mcp_result(id, r);
}

static json_t *
s_tools_call(ag_mcp_server_t *s, const json_t *id, const json_t *params,
             const ag_mcp_io_t *io)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    if (!name)
        return ag_mcp_error(id, AG_MCP_INVALID_PARAMS,
                            "tools/call needs params.name (a string)");
    if (args && !json_is_object(args))
        return ag_mcp_error(id, AG_MCP_INVALID_PARAMS,
                            "params.arguments of %s must be an object", name);
    if (!ag_mcp_box_has_tool(s->box, name))
        return ag_mcp_error(id, AG_MCP_INVALID_PARAMS,
                            "Unknown tool: %s (see tools/list)", name);
    json_t *token =
        json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (!json_is_string(token) && !json_is_integer(token))
        token = NULL;
    s_call_ctx_t ctx = {.s = s, .io = io, .token = token};
    ag_mcp_call_t call = {.progress =
                              token && io && io->send ? s_progress : NULL,
                          .should_stop = s_should_stop,
                          .log = s_log,
                          .arg = &ctx};
    pthread_mutex_lock(&s->lock);
    s->running = json_deep_copy(id);
    atomic_store(&s->cancel, false);
    pthread_mutex_unlock(&s->lock);
    json_t *empty = args ? NULL : json_object();
    bool cancelled = false;
    json_t *r =
        ag_mcp_box_call(s->box, name, args ? args : empty, &call, &cancelled);
    json_decref(empty);
    pthread_mutex_lock(&s->lock);
    json_decref(s->running);
    s->running = NULL;
    cancelled = cancelled || atomic_load(&s->cancel);
    atomic_store(&s->cancel, false);
    pthread_mutex_unlock(&s->lock);
    if (cancelled) {
        log_info("mcp: request cancelled; no response is sent");
        json_decref(r);
        return NULL;
    }
    return ag_mcp_result(id, r);
}

static json_t *
s_set_level(ag_mcp_server_t *s, const json_t *id, const json_t *params)
{
    const char *level = json_string_value(json_object_get(params, "level"));
    for (size_t i = 0; level && i < sizeof s_levels / sizeof s_levels[0]; i++)
        if (strcmp(level, s_levels[i]) == 0) {
            snprintf(s->level, sizeof s->level, "%s", level);
            return ag_mcp_result(id, json_object());
        }
    return ag_mcp_error(id, AG_MCP_INVALID_PARAMS,
                        "params.level must be one of debug, info, notice, "
                        "warning, error, critical, alert, emergency");
}

static json_t *
s_request(ag_mcp_server_t *s, const json_t *msg, const ag_mcp_io_t *io)
{
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *params = json_object_get(msg, "params");
    if (params && !json_is_object(params))
        return ag_mcp_error(id, AG_MCP_INVALID_PARAMS,
                            "params of %s must be an object", method);
    if (strcmp(method, "initialize") == 0)
        return s_initialize(s, id, params);
    if (strcmp(method, "ping") == 0)
        return ag_mcp_result(id, json_object());
    if (!s->version)
        return ag_mcp_error(id, AG_MCP_INVALID_REQUEST,
                            "%s before initialize: send initialize first",
                            method);
    if (strcmp(method, "tools/list") == 0)
        return ag_mcp_result(
            id, json_pack("{s:o}", "tools", ag_mcp_box_tools(s->box)));
    if (strcmp(method, "tools/call") == 0)
        return s_tools_call(s, id, params, io);
    if (strcmp(method, "logging/setLevel") == 0)
        return s_set_level(s, id, params);
    return ag_mcp_error(id, AG_MCP_METHOD_NOT_FOUND,
                        "Method not found: %s (this server offers "
                        "initialize, ping, tools/list, tools/call, "
                        "logging/setLevel)",
                        method);
}

static void
s_notification(ag_mcp_server_t *s, const json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (strcmp(method, "notifications/initialized") == 0)
        s->initialized = true;
    /* A cancellation for a request that is not running (it finished, or
     * the transport already handled it) is ignored, as the spec says. */
}

static json_t *
s_one(ag_mcp_server_t *s, const json_t *msg, const ag_mcp_io_t *io,
      bool in_batch)
{
    const char *why = NULL;
    switch (ag_mcp_classify(msg, &why)) {
    case AG_MCP_REQUEST:
        if (in_batch &&
            strcmp(json_string_value(json_object_get(msg, "method")),
                   "initialize") == 0)
            return ag_mcp_error(json_object_get(msg, "id"),
                                AG_MCP_INVALID_REQUEST,
                                "initialize must not be part of a batch");
        return s_request(s, msg, io);
    case AG_MCP_NOTIFICATION:
        s_notification(s, msg);
        return NULL;
    case AG_MCP_RESPONSE:
        return NULL; /* we send no requests, so nothing awaits an answer */
    case AG_MCP_INVALID:
        break;
    }
    return ag_mcp_error(json_is_object(msg) ? json_object_get(msg, "id") : NULL,
                        AG_MCP_INVALID_REQUEST, "Invalid Request: %s", why);
}

json_t *
ag_mcp_server_handle(ag_mcp_server_t *s, const json_t *msg,
                     const ag_mcp_io_t *io)
{
    if (!json_is_array(msg))
        return s_one(s, msg, io, false);
    if (!ag_mcp_batches_allowed(s->version))
        return ag_mcp_error(NULL, AG_MCP_INVALID_REQUEST,
                            "JSON-RPC batches are not accepted in revision %s "
                            "(only 2025-03-26 has them): send one message "
                            "at a time",
                            s->version ? s->version : "(none negotiated)");
    if (json_array_size(msg) == 0)
        return ag_mcp_error(NULL, AG_MCP_INVALID_REQUEST,
                            "an empty batch is not a request");
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msg, i, m)
    {
        json_t *r = s_one(s, m, io, true);
        if (r)
            json_array_append_new(out, r);
    }
    if (json_array_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}
