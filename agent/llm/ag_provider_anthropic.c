/*
 * Anthropic Messages API: request building and response interpretation.
 * See ag_provider_impl.h for the contract.
 *
 * Conversation mapping:
 *   system        the top-level "system" string (omitted when empty)
 *   user          {"role":"user","content":[{"type":"text","text":T}]}
 *   assistant     {"role":"assistant","content":[{"type":"text","text":T},
 *                  {"type":"tool_use","id","name","input":{...}}]}
 *                 (input is the arguments parsed; arguments that are not a
 *                 JSON object are sent as {"_raw": "<text>"})
 *   tool result   {"role":"user","content":[{"type":"tool_result",
 *                  "tool_use_id","content":[{"type":"text","text"},
 *                  {"type":"image","source":{"type":"base64","media_type",
 *                  "data"}}],"is_error":bool}]}
 * Empty text blocks are left out (the API rejects them), and consecutive
 * messages of the same role are merged into one, as the API requires.
 */
#include "agent/llm/ag_provider_impl.h"

#include "common/jget.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* Append `blocks` (stolen) to the last message when it has `role`, else
 * as a new message. Empty block lists add nothing. */
static void
s_push(json_t *msgs, const char *role, json_t *blocks)
{
    if (!json_array_size(blocks)) {
        json_decref(blocks);
        return;
    }
    size_t n = json_array_size(msgs);
    json_t *last = n ? json_array_get(msgs, n - 1) : NULL;
    if (last && strcmp(jget_str(last, "role", NULL), role) == 0) {
        json_array_extend(json_object_get(last, "content"), blocks);
        json_decref(blocks);
        return;
    }
    json_array_append_new(
        msgs, json_pack("{s:s, s:o}", "role", role, "content", blocks));
}

static json_t *
s_text_block(const char *text)
{
    return json_pack("{s:s, s:s}", "type", "text", "text", text);
}

static json_t *
s_input(const char *arguments)
{
    json_t *j = json_loads(arguments, 0, NULL);
    if (json_is_object(j))
        return j;
    json_decref(j);
    if (!*arguments)
        return json_object();
    return json_pack("{s:s}", "_raw", arguments);
}

static json_t *
s_messages(const ag_conv_t *conv)
{
    json_t *msgs = json_array();
    size_t n = ag_conv_count(conv);
    for (size_t i = 0; i < n; i++) {
        const ag_msg_t *m = ag_conv_get(conv, i);
        json_t *blocks = json_array();
        if (m->kind == AG_MSG_USER) {
            if (*m->text)
                json_array_append_new(blocks, s_text_block(m->text));
            s_push(msgs, "user", blocks);
        } else if (m->kind == AG_MSG_ASSISTANT) {
            if (*m->text)
                json_array_append_new(blocks, s_text_block(m->text));
            for (size_t k = 0; k < m->ncalls; k++)
                json_array_append_new(
                    blocks,
                    json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id",
                              m->calls[k].id, "name", m->calls[k].name, "input",
                              s_input(m->calls[k].arguments)));
            s_push(msgs, "assistant", blocks);
        } else {
            json_t *content = json_array();
            if (*m->text)
                json_array_append_new(content, s_text_block(m->text));
            for (size_t k = 0; k < m->nimages; k++)
                json_array_append_new(
                    content,
                    json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "image",
                              "source", "type", "base64", "media_type",
                              m->images[k].mime, "data", m->images[k].data));
            json_t *r = json_pack("{s:s, s:s, s:o, s:b}", "type", "tool_result",
                                  "tool_use_id", m->tool_call_id, "content",
                                  content, "is_error", m->is_error);
            json_array_append_new(blocks, r);
            s_push(msgs, "user", blocks);
        }
    }
    return msgs;
}

static json_t *
s_tools(const json_t *tools, err_t *err)
{
    json_t *out = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        json_t *o =
            ag_provider_tool_spec(t, i, "anthropic", "input_schema", err);
        if (!o) {
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, o);
    }
    return out;
}

static int
s_request(const ag_provider_t *p, const ag_conv_t *conv, const json_t *tools,
          ag_request_t *req, err_t *err)
{
    json_t *body =
        json_pack("{s:s, s:I}", "model", p->model, "max_tokens",
                  (json_int_t)(p->max_tokens > 0 ? p->max_tokens : 8192));
    if (*ag_conv_system(conv))
        json_object_set_new(body, "system", json_string(ag_conv_system(conv)));
    json_object_set_new(body, "messages", s_messages(conv));
    if (tools && json_array_size(tools)) {
        json_t *t = s_tools(tools, err);
        if (!t) {
            json_decref(body);
            return -1;
        }
        json_object_set_new(body, "tools", t);
    }
    json_object_set_new(body, "stream", json_boolean(p->stream));
    req->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    req->url = xasprintf("%s/v1/messages", p->base_url);
    size_t h = 0;
    req->headers[h++] = xstrdup("Content-Type: application/json");
    req->headers[h++] = xstrdup("anthropic-version: 2023-06-01");
    req->headers[h++] = xstrdup(p->stream ? "Accept: text/event-stream"
                                          : "Accept: application/json");
    if (p->key)
        req->headers[h++] = xasprintf("x-api-key: %s", p->key);
    return req->body ? 0
                     : err_set(err, ERR_PROVIDER,
                               "anthropic: cannot "
                               "encode the request");
}

static enum ag_stop
s_stop(const char *reason)
{
    if (strcmp(reason, "end_turn") == 0 || strcmp(reason, "stop_sequence") == 0)
        return AG_STOP_END;
    if (strcmp(reason, "tool_use") == 0)
        return AG_STOP_TOOL_USE;
    if (strcmp(reason, "max_tokens") == 0)
        return AG_STOP_MAX_TOKENS;
    return AG_STOP_OTHER;
}

static int
s_index(ag_turn_state_t *st, const json_t *j, size_t *index, err_t *err)
{
    const json_t *ix = json_object_get(j, "index");
    if (!json_is_integer(ix) || json_integer_value(ix) < 0)
        return ag_ts_malformed(st, "in the event stream", "", 0,
                               "a content block event without an index", err);
    *index = (size_t)json_integer_value(ix);
    return 0;
}

static int
s_error(ag_turn_state_t *st, const json_t *j, err_t *err)
{
    const json_t *e = json_object_get(j, "error");
    const char *msg = jget_str(e, "message", NULL);
    return ag_ts_server_error(st, jget_str(e, "type", NULL),
                              msg ? msg : "(no message)", err);
}

static int
s_on_event(ag_turn_state_t *st, const char *event, const char *data, size_t len,
           err_t *err)
{
    json_error_t je;
    json_t *j = json_loadb(data, len, 0, &je);
    int rc = -1;
    size_t index;
    if (!json_is_object(j)) {
        ag_ts_malformed(st, "in the event stream", data, len,
                        j ? "not an object" : je.text, err);
        goto out;
    }
    const char *type = jget_str(j, "type", NULL);
    if (!type)
        type = event;
    if (strcmp(type, "message_start") == 0) {
        const json_t *u =
            json_object_get(json_object_get(j, "message"), "usage");
        st->usage.input_tokens = jget_int(u, "input_tokens", 0);
        st->usage.output_tokens = jget_int(u, "output_tokens", 0);
    } else if (strcmp(type, "content_block_start") == 0) {
        const json_t *b = json_object_get(j, "content_block");
        const char *bt = jget_str(b, "type", NULL);
        if (s_index(st, j, &index, err) < 0)
            goto out;
        if (bt && strcmp(bt, "tool_use") == 0) {
            if (ag_ts_call(st, index, jget_str(b, "id", NULL),
                           jget_str(b, "name", NULL), err) < 0)
                goto out;
        } else if (bt && strcmp(bt, "text") == 0 && jget_str(b, "text", NULL)) {
            const char *t = jget_str(b, "text", NULL);
            ag_ts_text(st, t, strlen(t));
        }
    } else if (strcmp(type, "content_block_delta") == 0) {
        const json_t *d = json_object_get(j, "delta");
        const char *dt = jget_str(d, "type", NULL);
        if (s_index(st, j, &index, err) < 0)
            goto out;
        if (dt && strcmp(dt, "text_delta") == 0) {
            const char *t = jget_str(d, "text", NULL);
            if (t)
                ag_ts_text(st, t, strlen(t));
        } else if (dt && strcmp(dt, "input_json_delta") == 0) {
            const char *pj = jget_str(d, "partial_json", NULL);
            if (pj && ag_ts_call_args(st, index, pj, strlen(pj), err) < 0)
                goto out;
        }
    } else if (strcmp(type, "message_delta") == 0) {
        const char *reason =
            jget_str(json_object_get(j, "delta"), "stop_reason", NULL);
        const json_t *u = json_object_get(j, "usage");
        if (reason)
            ag_ts_stop(st, s_stop(reason));
        if (json_object_get(u, "output_tokens"))
            st->usage.output_tokens = jget_int(u, "output_tokens", 0);
    } else if (strcmp(type, "message_stop") == 0) {
        st->done = 1;
    } else if (strcmp(type, "error") == 0) {
        s_error(st, j, err);
        goto out;
    }
    /* ping, content_block_stop and unknown events need nothing. */
    rc = 0;
out:
    json_decref(j);
    return rc;
}

static int
s_on_body(ag_turn_state_t *st, const json_t *body, err_t *err)
{
    const char *type = jget_str(body, "type", NULL);
    if (type && strcmp(type, "error") == 0)
        return s_error(st, body, err);
    const json_t *content = json_object_get(body, "content");
    if (!json_is_array(content))
        return ag_ts_malformed(st, "in the response body", "", 0,
                               "no \"content\" array", err);
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b)
    {
        const char *bt = jget_str(b, "type", NULL);
        if (bt && strcmp(bt, "text") == 0 && jget_str(b, "text", NULL)) {
            const char *t = jget_str(b, "text", NULL);
            ag_ts_text(st, t, strlen(t));
        } else if (bt && strcmp(bt, "tool_use") == 0) {
            if (ag_ts_call(st, i, jget_str(b, "id", NULL),
                           jget_str(b, "name", NULL), err) < 0)
                return -1;
            const json_t *in = json_object_get(b, "input");
            char *args = in ? json_dumps(in, JSON_COMPACT) : NULL;
            if (args)
                ag_ts_call_args(st, i, args, strlen(args), err);
            free(args);
        }
    }
    const char *reason = jget_str(body, "stop_reason", NULL);
    if (reason)
        ag_ts_stop(st, s_stop(reason));
    const json_t *u = json_object_get(body, "usage");
    st->usage.input_tokens = jget_int(u, "input_tokens", 0);
    st->usage.output_tokens = jget_int(u, "output_tokens", 0);
    st->done = 1;
    return 0;
}

const ag_provider_ops_t ag_anthropic_ops = {
    .name = "anthropic",
    .key_env = "ANTHROPIC_API_KEY",
    .base_env = "ANTHROPIC_BASE_URL",
    .request = s_request,
    .on_event = s_on_event,
    .on_body = s_on_body,
};
