#include "agent/llm/ag_conv.h"

#include "common/jget.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

struct ag_conv {
    char *system;  /* owned; never NULL */
    ag_msg_t *msg; /* owned array; every string and array in it is owned */
    size_t n;      /* messages in use */
    size_t alloc;  /* messages allocated */
};

static const char *
s_dup(const char *s)
{
    return xstrdup(s ? s : "");
}

static void
s_free(const char *s)
{
    free((void *)s);
}

ag_conv_t *
ag_conv_new(const char *system)
{
    ag_conv_t *c = xcalloc(1, sizeof *c);
    c->system = xstrdup(system ? system : "");
    return c;
}

static void
s_msg_release(ag_msg_t *m)
{
    s_free(m->text);
    s_free(m->tool_call_id);
    s_free(m->name);
    for (size_t i = 0; i < m->ncalls; i++) {
        s_free(m->calls[i].id);
        s_free(m->calls[i].name);
        s_free(m->calls[i].arguments);
    }
    free((void *)m->calls);
    for (size_t i = 0; i < m->nimages; i++) {
        s_free(m->images[i].mime);
        s_free(m->images[i].data);
    }
    free((void *)m->images);
}

void
ag_conv_destroy(ag_conv_t **p)
{
    if (!p || !*p)
        return;
    ag_conv_t *c = *p;
    for (size_t i = 0; i < c->n; i++)
        s_msg_release(&c->msg[i]);
    free(c->msg);
    free(c->system);
    free(c);
    *p = NULL;
}

void
ag_conv_set_system(ag_conv_t *c, const char *system)
{
    free(c->system);
    c->system = xstrdup(system ? system : "");
}

const char *
ag_conv_system(const ag_conv_t *c)
{
    return c->system;
}

/* Append a zeroed message of `kind` with every string set to "". */
static ag_msg_t *
s_push(ag_conv_t *c, enum ag_msg_kind kind)
{
    if (c->n == c->alloc) {
        c->alloc = c->alloc ? 2 * c->alloc : 8;
        c->msg = xrealloc(c->msg, c->alloc * sizeof *c->msg);
    }
    ag_msg_t *m = &c->msg[c->n++];
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->text = s_dup("");
    m->tool_call_id = s_dup("");
    m->name = s_dup("");
    return m;
}

void
ag_conv_add_user(ag_conv_t *c, const char *text)
{
    ag_msg_t *m = s_push(c, AG_MSG_USER);
    s_free(m->text);
    m->text = s_dup(text);
}

void
ag_conv_add_assistant(ag_conv_t *c, const char *text,
                      const ag_tool_call_t *calls, size_t ncalls)
{
    ag_msg_t *m = s_push(c, AG_MSG_ASSISTANT);
    s_free(m->text);
    m->text = s_dup(text);
    if (ncalls) {
        ag_tool_call_t *v = xcalloc(ncalls, sizeof *v);
        for (size_t i = 0; i < ncalls; i++) {
            v[i].id = s_dup(calls[i].id);
            v[i].name = s_dup(calls[i].name);
            v[i].arguments = s_dup(calls[i].arguments);
        }
        m->calls = v;
        m->ncalls = ncalls;
    }
}

void
ag_conv_add_tool_result(ag_conv_t *c, const char *tool_call_id,
                        const char *name, const char *text, int is_error,
                        const ag_image_t *images, size_t nimages)
{
    ag_msg_t *m = s_push(c, AG_MSG_TOOL_RESULT);
    s_free(m->text);
    s_free(m->tool_call_id);
    s_free(m->name);
    m->text = s_dup(text);
    m->tool_call_id = s_dup(tool_call_id);
    m->name = s_dup(name);
    m->is_error = is_error ? 1 : 0;
    if (nimages) {
        ag_image_t *v = xcalloc(nimages, sizeof *v);
        for (size_t i = 0; i < nimages; i++) {
            v[i].mime = s_dup(images[i].mime);
            v[i].data = s_dup(images[i].data);
        }
        m->images = v;
        m->nimages = nimages;
    }
}

size_t
ag_conv_count(const ag_conv_t *c)
{
    return c->n;
}

const ag_msg_t *
ag_conv_get(const ag_conv_t *c, size_t i)
{
    return i < c->n ? &c->msg[i] : NULL;
}

json_t *
ag_conv_to_json(const ag_conv_t *c)
{
    json_t *msgs = json_array();
    for (size_t i = 0; i < c->n; i++) {
        const ag_msg_t *m = &c->msg[i];
        json_t *o = NULL;
        switch (m->kind) {
        case AG_MSG_USER:
            o = json_pack("{s:s, s:s}", "role", "user", "text", m->text);
            break;
        case AG_MSG_ASSISTANT: {
            json_t *calls = json_array();
            for (size_t k = 0; k < m->ncalls; k++)
                json_array_append_new(
                    calls, json_pack("{s:s, s:s, s:s}", "id", m->calls[k].id,
                                     "name", m->calls[k].name, "arguments",
                                     m->calls[k].arguments));
            o = json_pack("{s:s, s:s, s:o}", "role", "assistant", "text",
                          m->text, "tool_calls", calls);
            break;
        }
        case AG_MSG_TOOL_RESULT: {
            json_t *imgs = json_array();
            for (size_t k = 0; k < m->nimages; k++)
                json_array_append_new(imgs, json_pack("{s:s, s:s}", "mime",
                                                      m->images[k].mime, "data",
                                                      m->images[k].data));
            o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:o}", "role", "tool",
                          "tool_call_id", m->tool_call_id, "name", m->name,
                          "text", m->text, "is_error", m->is_error, "images",
                          imgs);
            break;
        }
        }
        json_array_append_new(msgs, o);
    }
    return json_pack("{s:s, s:o}", "system", c->system, "messages", msgs);
}

ag_conv_t *
ag_conv_from_json(const json_t *j, err_t *err)
{
    const json_t *msgs = json_object_get(j, "messages");
    const char *system = jget_strict(j, "system", "");
    if (!json_is_object(j) || !json_is_array(msgs) || !system) {
        err_set(err, ERR_USAGE,
                "conversation: expected {\"system\": string, \"messages\": "
                "[...]}");
        return NULL;
    }
    ag_conv_t *c = ag_conv_new(system);
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *role = jget_strict(m, "role", "");
        const char *text = jget_strict(m, "text", "");
        if (!json_is_object(m) || !role || !text)
            goto bad;
        if (strcmp(role, "user") == 0) {
            ag_conv_add_user(c, text);
        } else if (strcmp(role, "assistant") == 0) {
            const json_t *calls = json_object_get(m, "tool_calls");
            size_t n = json_is_array(calls) ? json_array_size(calls) : 0;
            ag_tool_call_t *v = xcalloc(n ? n : 1, sizeof *v);
            int okay = 1;
            for (size_t k = 0; k < n; k++) {
                const json_t *tc = json_array_get(calls, k);
                v[k].id = jget_strict(tc, "id", "");
                v[k].name = jget_strict(tc, "name", "");
                v[k].arguments = jget_strict(tc, "arguments", "");
                if (!json_is_object(tc) || !v[k].id || !v[k].name ||
                    !v[k].arguments)
                    okay = 0;
            }
            if (okay)
                ag_conv_add_assistant(c, text, v, n);
            free(v);
            if (!okay)
                goto bad;
        } else if (strcmp(role, "tool") == 0) {
            const json_t *imgs = json_object_get(m, "images");
            size_t n = json_is_array(imgs) ? json_array_size(imgs) : 0;
            ag_image_t *v = xcalloc(n ? n : 1, sizeof *v);
            int okay = 1;
            for (size_t k = 0; k < n; k++) {
                const json_t *im = json_array_get(imgs, k);
                v[k].mime = jget_strict(im, "mime", "");
                v[k].data = jget_strict(im, "data", "");
                if (!json_is_object(im) || !v[k].mime || !v[k].data)
                    okay = 0;
            }
            const char *id = jget_strict(m, "tool_call_id", "");
            const char *name = jget_strict(m, "name", "");
            if (okay && id && name)
                ag_conv_add_tool_result(
                    c, id, name, text,
                    json_is_true(json_object_get(m, "is_error")), v, n);
            else
                okay = 0;
            free(v);
            if (!okay)
                goto bad;
        } else {
            goto bad;
        }
    }
    return c;
bad:
    err_set(err, ERR_USAGE,
            "conversation: message %zu is malformed (expected role user, "
            "assistant or tool with string fields)",
            i);
    ag_conv_destroy(&c);
    return NULL;
}
