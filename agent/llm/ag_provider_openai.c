/*
 * OpenAI Chat Completions (and compatible servers): request building and
 * response interpretation. See ag_provider_impl.h for the contract.
 *
 * Conversation mapping:
 *   system            {"role":"system","content":S}
 *   user              {"role":"user","content":T}
 *   assistant         {"role":"assistant","content":T|null,
 *                      "tool_calls":[{"id","type":"function",
 *                                     "function":{"name","arguments"}}]}
 *   tool result       {"role":"tool","tool_call_id","content":T}
 *   result images     tool messages cannot carry images, so after a run of
 *                     tool messages ONE user message follows with parts
 *                     [{"type":"text","text":"Images produced by tool call
 *                     ID:"}, {"type":"image_url","image_url":{"url":
 *                     "data:MIME;base64,DATA"}}, ...] for every result of
 *                     the run that has images.
 *   is_error          not representable; the text must say it.
 */
#include "agent/llm/ag_provider_impl.h"

#include "common/jget.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

static json_t *
s_messages(const ag_conv_t *conv)
{
    json_t *msgs = json_array();
    json_t *parts = NULL; /* image parts of the current run of results */
    if (*ag_conv_system(conv))
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system",
                                              "content", ag_conv_system(conv)));
    size_t n = ag_conv_count(conv);
    for (size_t i = 0; i < n; i++) {
        const ag_msg_t *m = ag_conv_get(conv, i);
        if (m->kind != AG_MSG_TOOL_RESULT && parts) {
            json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "user",
                                                  "content", parts));
            parts = NULL;
        }
        if (m->kind == AG_MSG_USER) {
            json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user",
                                                  "content", m->text));
        } else if (m->kind == AG_MSG_ASSISTANT) {
            json_t *o = json_pack("{s:s}", "role", "assistant");
            if (*m->text || !m->ncalls)
                json_object_set_new(o, "content", json_string(m->text));
            else
                json_object_set_new(o, "content", json_null());
            if (m->ncalls) {
                json_t *calls = json_array();
                for (size_t k = 0; k < m->ncalls; k++)
                    json_array_append_new(
                        calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id",
                                         m->calls[k].id, "type", "function",
                                         "function", "name", m->calls[k].name,
                                         "arguments", m->calls[k].arguments));
                json_object_set_new(o, "tool_calls", calls);
            }
            json_array_append_new(msgs, o);
        } else {
            json_array_append_new(msgs,
                                  json_pack("{s:s, s:s, s:s}", "role", "tool",
                                            "tool_call_id", m->tool_call_id,
                                            "content", m->text));
            if (m->nimages) {
                if (!parts)
                    parts = json_array();
                char *head = xasprintf("Images produced by tool call %s:",
                                       m->tool_call_id);
                json_array_append_new(parts, json_pack("{s:s, s:s}", "type",
                                                       "text", "text", head));
                free(head);
                for (size_t k = 0; k < m->nimages; k++) {
                    char *url = xasprintf("data:%s;base64,%s",
                                          m->images[k].mime, m->images[k].data);
                    json_array_append_new(
                        parts, json_pack("{s:s, s:{s:s}}", "type", "image_url",
                                         "image_url", "url", url));
                    free(url);
                }
            }
        }
    }
    if (parts)
        json_array_append_new(
            msgs, json_pack("{s:s, s:o}", "role", "user", "content", parts));
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
        json_t *fn = ag_provider_tool_spec(t, i, "openai", "parameters", err);
        if (!fn) {
            json_decref(out);
            return NULL;
        }
        json_array_append_new(
            out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    return out;
}

static int
s_request(const ag_provider_t *p, const ag_conv_t *conv, const json_t *tools,
          ag_request_t *req, err_t *err)
{
    json_t *body = json_pack("{s:s, s:o}", "model", p->model, "messages",
                             s_messages(conv));
    if (tools && json_array_size(tools)) {
        json_t *t = s_tools(tools, err);
        if (!t) {
            json_decref(body);
            return -1;
        }
        json_object_set_new(body, "tools", t);
    }
    json_object_set_new(body, "stream", json_boolean(p->stream));
    if (p->stream)
        json_object_set_new(body, "stream_options",
                            json_pack("{s:b}", "include_usage", 1));
    if (p->max_tokens > 0)
        json_object_set_new(body, "max_tokens", json_integer(p->max_tokens));
    req->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    req->url = xasprintf("%s/chat/completions", p->base_url);
    size_t h = 0;
    req->headers[h++] = xstrdup("Content-Type: application/json");
    req->headers[h++] = xstrdup(p->stream ? "Accept: text/event-stream"
                                          : "Accept: application/json");
    if (p->key)
        req->headers[h++] = xasprintf("Authorization: Bearer %s", p->key);
    return req->body ? 0
                     : err_set(err, ERR_PROVIDER,
                               "openai: cannot encode "
                               "the request");
}

static enum ag_stop
s_stop(const char *reason)
{
    if (strcmp(reason, "stop") == 0)
        return AG_STOP_END;
    if (strcmp(reason, "tool_calls") == 0 ||
        strcmp(reason, "function_call") == 0)
        return AG_STOP_TOOL_USE;
    if (strcmp(reason, "length") == 0)
        return AG_STOP_MAX_TOKENS;
    return AG_STOP_OTHER;
}

static void
s_usage(ag_turn_state_t *st, const json_t *j)
{
    const json_t *u = json_object_get(j, "usage");
    if (!json_is_object(u))
        return;
    st->usage.input_tokens = jget_int(u, "prompt_tokens", 0);
    st->usage.output_tokens = jget_int(u, "completion_tokens", 0);
}

static int
s_error_object(ag_turn_state_t *st, const json_t *j, err_t *err)
{
    const json_t *e = json_object_get(j, "error");
    if (!e)
        return 0;
    const char *type = jget_str(e, "type", NULL);
    const char *code = jget_str(e, "code", NULL);
    const char *msg =
        json_is_string(e) ? json_string_value(e) : jget_str(e, "message", NULL);
    return ag_ts_server_error(st,
                              type   ? type
                              : code ? code
                                     : "an error",
                              msg ? msg : "(no message)", err);
}

/* Tool calls of a delta (stream) or a message (whole body). */
static int
s_tool_calls(ag_turn_state_t *st, const json_t *calls, err_t *err)
{
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c)
    {
        const json_t *ix = json_object_get(c, "index");
        const json_t *fn = json_object_get(c, "function");
        const char *args = jget_str(fn, "arguments", NULL);
        json_int_t index =
            json_is_integer(ix) ? json_integer_value(ix) : (json_int_t)i;
        if (index < 0)
            return err_set(err, ERR_PROVIDER,
                           "openai: the server sent a negative tool call "
                           "index");
        if (ag_ts_call(st, (size_t)index, jget_str(c, "id", NULL),
                       jget_str(fn, "name", NULL), err) < 0)
            return -1;
        if (args &&
            ag_ts_call_args(st, (size_t)index, args, strlen(args), err) < 0)
            return -1;
    }
    return 0;
}

static int
s_choice(ag_turn_state_t *st, const json_t *choice, const char *part,
         err_t *err)
{
    const json_t *d = json_object_get(choice, part);
    const char *text = jget_str(d, "content", NULL);
    const char *finish = jget_str(choice, "finish_reason", NULL);
    if (text)
        ag_ts_text(st, text, strlen(text));
    if (s_tool_calls(st, json_object_get(d, "tool_calls"), err) < 0)
        return -1;
    if (finish)
        ag_ts_stop(st, s_stop(finish));
    return 0;
}

static int
s_on_event(ag_turn_state_t *st, const char *type, const char *data, size_t len,
           err_t *err)
{
    (void)type;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        st->done = 1;
        return 0;
    }
    json_error_t je;
    json_t *j = json_loadb(data, len, 0, &je);
    int rc = -1;
    if (!json_is_object(j)) {
        ag_ts_malformed(st, "in the event stream", data, len,
                        j ? "not an object" : je.text, err);
        goto out;
    }
    if (s_error_object(st, j, err) < 0)
        goto out;
    s_usage(st, j);
    const json_t *choices = json_object_get(j, "choices");
    if (json_array_size(choices) > 0 &&
        s_choice(st, json_array_get(choices, 0), "delta", err) < 0)
        goto out;
    rc = 0;
out:
    json_decref(j);
    return rc;
}

static int
s_on_body(ag_turn_state_t *st, const json_t *body, err_t *err)
{
    if (s_error_object(st, body, err) < 0)
        return -1;
    const json_t *choices = json_object_get(body, "choices");
    if (!json_array_size(choices))
        return ag_ts_malformed(st, "in the response body", "", 0,
                               "no \"choices\"", err);
    s_usage(st, body);
    if (s_choice(st, json_array_get(choices, 0), "message", err) < 0)
        return -1;
    st->done = 1;
    return 0;
}

const ag_provider_ops_t ag_openai_ops = {
    .name = "openai",
    .key_env = "OPENAI_API_KEY",
    .base_env = "OPENAI_BASE_URL",
    .request = s_request,
    .on_event = s_on_event,
    .on_body = s_on_body,
};
