#include "agent/mcp/ag_mcp_rpc.h"

#include "common/jsonlim.h"
#include "common/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const ag_mcp_versions[] = {AG_MCP_LATEST_VERSION, "2025-06-18",
                                       "2025-03-26", NULL};

bool
ag_mcp_version_supported(const char *version)
{
    for (size_t i = 0; version && ag_mcp_versions[i]; i++)
        if (strcmp(version, ag_mcp_versions[i]) == 0)
            return true;
    return false;
}

const char *
ag_mcp_negotiate(const char *requested)
{
    for (size_t i = 0; requested && ag_mcp_versions[i]; i++)
        if (strcmp(requested, ag_mcp_versions[i]) == 0)
            return ag_mcp_versions[i];
    return ag_mcp_versions[0];
}

bool
ag_mcp_batches_allowed(const char *version)
{
    return version && strcmp(version, "2025-03-26") == 0;
}

/* A valid id: a string or an integer (MCP forbids null). */
static bool
s_is_id(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

ag_mcp_kind_t
ag_mcp_classify(const json_t *msg, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (!json_is_object(msg)) {
        *why = "a message must be a JSON object";
        return AG_MCP_INVALID;
    }
    const char *v = json_string_value(json_object_get(msg, "jsonrpc"));
    if (!v || strcmp(v, "2.0") != 0) {
        *why = "\"jsonrpc\" must be \"2.0\"";
        return AG_MCP_INVALID;
    }
    json_t *id = json_object_get(msg, "id");
    json_t *method = json_object_get(msg, "method");
    if (method) {
        if (!json_is_string(method)) {
            *why = "\"method\" must be a string";
            return AG_MCP_INVALID;
        }
        json_t *params = json_object_get(msg, "params");
        if (params && !json_is_object(params) && !json_is_array(params)) {
            *why = "\"params\" must be an object";
            return AG_MCP_INVALID;
        }
        if (!id)
            return AG_MCP_NOTIFICATION;
        if (!s_is_id(id)) {
            *why = "\"id\" must be a string or an integer";
            return AG_MCP_INVALID;
        }
        return AG_MCP_REQUEST;
    }
    if (s_is_id(id) && (json_object_get(msg, "result") ||
                        json_is_object(json_object_get(msg, "error"))))
        return AG_MCP_RESPONSE;
    *why = "a message needs a \"method\" (or a \"result\" or \"error\" "
           "with an \"id\")";
    return AG_MCP_INVALID;
}

json_t *
ag_mcp_parse(const char *text, size_t len, json_t **error)
{
    *error = NULL;
    if (len > AG_MCP_MAX_MESSAGE) {
        *error = ag_mcp_error(NULL, AG_MCP_INVALID_REQUEST,
                              "message of %zu bytes refused: the limit is "
                              "%zu bytes (8 MiB)",
                              len, AG_MCP_MAX_MESSAGE);
        return NULL;
    }
    /* Within the parse-cost bound (common/jsonlim), checked unparsed. */
    jsonlim_scan_t scan = jsonlim_scan(text, len);
    char why[160];
    if (scan.depth < 0) {
        *error = ag_mcp_error(NULL, AG_MCP_PARSE_ERROR,
                              "invalid JSON: its brackets do not balance");
        return NULL;
    }
    if (!jsonlim_fits(&scan, len, NULL, why, sizeof why)) {
        *error = ag_mcp_error(NULL, AG_MCP_INVALID_REQUEST,
                              "message refused: %s", why);
        return NULL;
    }
    json_error_t jerr;
    json_t *msg =
        json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!msg) {
        *error = ag_mcp_error(NULL, AG_MCP_PARSE_ERROR,
                              "invalid JSON at byte %d: %s", jerr.position,
                              jerr.text);
        return NULL;
    }
    if (!json_is_object(msg) && !json_is_array(msg)) {
        json_decref(msg);
        *error = ag_mcp_error(NULL, AG_MCP_INVALID_REQUEST,
                              "a message must be a JSON object");
        return NULL;
    }
    return msg;
}

json_t *
ag_mcp_error(const json_t *id, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:i, s:s}", "code", code, "message", text);
    free(text);
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
                     s_is_id(id) ? (json_t *)id : json_null(), "error", err);
}

json_t *
ag_mcp_result(const json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
                     s_is_id(id) ? (json_t *)id : json_null(), "result",
                     result ? result : json_object());
}

json_t *
ag_mcp_notification(const char *method, json_t *params)
{
    json_t *n = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (params)
        json_object_set_new(n, "params", params);
    return n;
}

char *
ag_mcp_dump(const json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    return s ? s : xstrdup("null");
}
