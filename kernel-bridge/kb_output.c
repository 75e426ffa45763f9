/*
 * kb_output: the output model of one execution. See kb_output.h.
 *
 * Byte accounting (what an output costs against the cap) is in
 * kb_output_size.c. Every display update is charged to the running
 * execution again (COST_UPDATE plus its data once per output it rewrites,
 * including outputs of earlier executions, which a notebook writes out
 * again), so updates cannot grow a notebook past the cap of the cell that
 * sends them.
 *
 * Stream coalescing without quadratic copies: the text of the last output,
 * when it is a stream, lives in `tail` and is written into the JSON string
 * only when someone looks (s_flush). Invariant: tail.len > 0 implies the
 * last output is a stream whose "text" is stale and tail holds all of it.
 */
#include "kernel-bridge/kb_output.h"
#include "kernel-bridge/kb_output_impl.h"

#include "common/buf.h"
#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kb_displays {
    json_t *map;       /* display_id -> array of [output, serial] */
    json_int_t serial; /* last serial handed to a kb_output_t */
};

struct kb_output {
    kb_displays_t *displays; /* borrowed, or owned when own_displays */
    bool own_displays;       /* displays was made by kb_output_new */
    bool merge_streams;      /* coalesce consecutive same-name streams */
    json_int_t serial;       /* identifies this execution's registrations */
    json_t *my_ids;          /* object: display_ids this execution registered */
    json_t *outputs;         /* owned array of output dicts */
    buf_t *tail;             /* pending text of a trailing stream (heap, so
                                const getters may flush it) */
    size_t max_bytes;        /* cap on bytes; 0 = none */
    size_t bytes;            /* charge of what `outputs` holds now */
    bool clear_pending;      /* clear_output(wait=True) awaits next output */
    bool truncated;          /* cap reached; marker appended */
    bool saw_error;          /* an error output was stored */
    size_t malformed;        /* messages ignored for bad shape */
    int execution_count;     /* -1 until known */
    char *status;            /* owned reply status or NULL */
    json_t *user_expressions; /* owned object: the reply's
                                 user_expressions ({} until a reply) */
    json_t *payload;          /* owned array: the reply's payloads (pager
                                 pages, ask_exit, ...); [] until a reply */
    bool interrupted;         /* the execution was interrupted */
    bool timed_out;           /* the execution hit its time limit */
    bool died;                /* the kernel died during the execution */
    char *death_reason;       /* owned, NULL unless died with a reason */
    int64_t duration_ms;      /* wall time of the execution */
};

/* --- registry ---------------------------------------------------------- */

kb_displays_t *
kb_displays_new(void)
{
    kb_displays_t *d = xcalloc(1, sizeof *d);
    d->map = json_object();
    return d;
}

void
kb_displays_destroy(kb_displays_t **p)
{
    if (!p || !*p)
        return;
    json_decref((*p)->map);
    free(*p);
    *p = NULL;
}

size_t
kb_displays_count(const kb_displays_t *d, const char *display_id)
{
    if (!d || !display_id)
        return 0;
    return json_array_size(json_object_get(d->map, display_id));
}

static void
s_register(kb_output_t *o, const char *id, json_t *out)
{
    json_t *list = json_object_get(o->displays->map, id);
    if (!list) {
        list = json_array();
        json_object_set_new(o->displays->map, id, list);
    }
    json_array_append_new(list, json_pack("[Oi]", out, (json_int_t)o->serial));
    json_object_set_new(o->my_ids, id, json_true());
}

/* Drop this execution's registrations (its outputs are being cleared). */
static void
s_unregister_mine(kb_output_t *o)
{
    const char *id;
    json_t *v;
    json_object_foreach(o->my_ids, id, v)
    {
        json_t *list = json_object_get(o->displays->map, id);
        for (size_t i = json_array_size(list); i-- > 0;) {
            json_t *pair = json_array_get(list, i);
            if (json_integer_value(json_array_get(pair, 1)) == o->serial)
                json_array_remove(list, i);
        }
        if (list && json_array_size(list) == 0)
            json_object_del(o->displays->map, id);
    }
    json_object_clear(o->my_ids);
}

/* --- model ------------------------------------------------------------- */

void
kb_output_merge_streams(kb_output_t *o, bool on)
{
    o->merge_streams = on;
}

kb_output_t *
kb_output_new(kb_displays_t *displays, size_t max_bytes)
{
    kb_output_t *o = xcalloc(1, sizeof *o);
    if (displays) {
        o->displays = displays;
    } else {
        o->displays = kb_displays_new();
        o->own_displays = true;
    }
    o->serial = ++o->displays->serial;
    o->my_ids = json_object();
    o->outputs = json_array();
    o->tail = xmalloc(sizeof *o->tail);
    buf_init(o->tail, 0);
    o->max_bytes = max_bytes;
    o->execution_count = -1;
    o->payload = json_array();
    o->user_expressions = json_object();
    return o;
}

void
kb_output_destroy(kb_output_t **p)
{
    if (!p || !*p)
        return;
    kb_output_t *o = *p;
    /* Registrations stay: the outputs may live on in a notebook, and later
     * executions may still update them. */
    if (o->own_displays)
        kb_displays_destroy(&o->displays);
    json_decref(o->my_ids);
    json_decref(o->outputs);
    json_decref(o->payload);
    json_decref(o->user_expressions);
    buf_release(o->tail);
    free(o->tail);
    free(o->status);
    free(o->death_reason);
    free(o);
    *p = NULL;
}

/* Write pending stream text into the last output. */
static void
s_flush(const kb_output_t *o)
{
    if (o->tail->len == 0)
        return;
    size_t n = json_array_size(o->outputs);
    json_t *last = json_array_get(o->outputs, n - 1);
    json_object_set_new(last, "text",
                        json_stringn(o->tail->data, o->tail->len));
    buf_reset(o->tail);
}

static void
s_clear(kb_output_t *o)
{
    buf_reset(o->tail);
    json_array_clear(o->outputs);
    o->bytes = 0;
    o->clear_pending = false;
    s_unregister_mine(o);
}

/* The last output if it is a stream named `name`, else NULL. */
static json_t *
s_last_stream(const kb_output_t *o, const char *name)
{
    size_t n = json_array_size(o->outputs);
    json_t *last = n ? json_array_get(o->outputs, n - 1) : NULL;
    if (!last ||
        strcmp(json_string_value(json_object_get(last, "output_type")),
               "stream") ||
        strcmp(json_string_value(json_object_get(last, "name")), name))
        return NULL;
    return last;
}

/* Append `text` to the trailing stream `last` (via tail). */
static void
s_tail_append(kb_output_t *o, json_t *last, const char *text, size_t len)
{
    if (o->tail->len == 0) {
        json_t *t = json_object_get(last, "text");
        buf_append(o->tail, json_string_value(t), json_string_length(t));
    }
    buf_append(o->tail, text, len);
}

/* Cap reached: stop storing and append the marker once. */
static void
s_truncate(kb_output_t *o)
{
    char marker[128];
    if (o->truncated)
        return;
    o->truncated = true;
    o->clear_pending = false;
    snprintf(marker, sizeof marker, KB_OUTPUT_TRUNCATED_FMT, o->max_bytes);
    json_t *last = s_last_stream(o, "stderr");
    if (last) {
        s_flush(o);
        json_t *t = json_object_get(last, "text");
        size_t tl = json_string_length(t);
        bool nl = tl == 0 || json_string_value(t)[tl - 1] == '\n';
        s_tail_append(o, last, "\n", nl ? 0 : 1);
        s_tail_append(o, last, marker, strlen(marker));
        s_flush(o);
        return;
    }
    s_flush(o);
    json_array_append_new(o->outputs,
                          json_pack("{s:s, s:s, s:s}", "output_type", "stream",
                                    "name", "stderr", "text", marker));
}

/* Would adding `n` bytes pass the cap? */
static bool
s_over(const kb_output_t *o, size_t n)
{
    return o->max_bytes && (n > o->max_bytes || o->bytes > o->max_bytes - n);
}

static size_t
s_room(const kb_output_t *o)
{
    if (!o->max_bytes)
        return SIZE_MAX;
    return o->bytes >= o->max_bytes ? 0 : o->max_bytes - o->bytes;
}

/* --- shape checks ------------------------------------------------------ */

/* nbformat: string or array of strings. */
static bool
s_is_multiline(json_t *v)
{
    size_t i;
    json_t *x;
    if (json_is_string(v))
        return true;
    if (!json_is_array(v))
        return false;
    json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
    return true;
}

static bool
s_is_json_mime(const char *mime)
{
    size_t n = strlen(mime);
    if (!strcmp(mime, "application/json"))
        return true;
    return !strncmp(mime, "application/", 12) && n >= 5 &&
           !strcmp(mime + n - 5, "+json");
}

/* nbformat's mimebundle: JSON mime types hold any JSON, others text. */
static bool
s_is_mimebundle(json_t *v)
{
    const char *key;
    json_t *x;
    if (!json_is_object(v))
        return false;
    json_object_foreach(v, key, x)
    {
        if (!s_is_json_mime(key) && !s_is_multiline(x))
            return false;
    }
    return true;
}

/* content.transient.display_id: 0 and *id = NULL when absent, -1 when the
 * transient or the id has the wrong type. */
static int
s_display_id(json_t *content, const char **id)
{
    json_t *tr = json_object_get(content, "transient");
    *id = NULL;
    if (!tr || json_is_null(tr))
        return 0;
    if (!json_is_object(tr))
        return -1;
    json_t *v = json_object_get(tr, "display_id");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        strlen(json_string_value(v)) != json_string_length(v))
        return -1;
    *id = json_string_value(v);
    return 0;
}

/* data and metadata of a display message; metadata defaults to {}. */
static int
s_display_parts(json_t *content, json_t **data, json_t **meta)
{
    *data = json_object_get(content, "data");
    *meta = json_object_get(content, "metadata");
    if (!s_is_mimebundle(*data))
        return -1;
    if (*meta && !json_is_object(*meta))
        return -1;
    return 0;
}

/* --- handlers ---------------------------------------------------------- */

static int
s_malformed(kb_output_t *o)
{
    o->malformed++;
    return -1;
}

/* Before storing a new output: the delayed clear of clear_output(wait). */
static void
s_before_output(kb_output_t *o)
{
    if (o->clear_pending)
        s_clear(o);
}

/* Replace data/metadata of every output registered under `id`. */
static void
s_update(kb_output_t *o, const char *id, json_t *data, json_t *meta)
{
    json_t *list = json_object_get(o->displays->map, id);
    size_t i;
    json_t *pair;
    if (!list)
        return;
    json_t *d = json_deep_copy(data);
    json_t *m = meta ? json_deep_copy(meta) : json_object();
    size_t add =
        kb_output_add_sat(kb_output_json_cost(d), kb_output_json_cost(m));
    /* Every target is written out again with the new data, so each costs
     * `add` now. This execution's own targets give back what their old
     * data cost; the targets of earlier executions were charged to those,
     * so their new data is charged here, on every update. */
    size_t sub = 0, plus = COST_UPDATE;
    json_array_foreach(list, i, pair)
    {
        json_t *out = json_array_get(pair, 0);
        if (json_integer_value(json_array_get(pair, 1)) == o->serial)
            sub += kb_output_json_cost(json_object_get(out, "data")) +
                   kb_output_json_cost(json_object_get(out, "metadata"));
        plus = kb_output_add_sat(plus, add);
    }
    size_t base = o->bytes >= sub ? o->bytes - sub : 0;
    if (o->max_bytes && (plus > o->max_bytes || base > o->max_bytes - plus)) {
        s_truncate(o);
        goto out;
    }
    json_array_foreach(list, i, pair)
    {
        json_t *out = json_array_get(pair, 0);
        json_object_set(out, "data", d);
        json_object_set(out, "metadata", m);
    }
    o->bytes = base + plus;
out:
    json_decref(d);
    json_decref(m);
}

static int
s_on_stream(kb_output_t *o, json_t *content)
{
    json_t *name = json_object_get(content, "name");
    json_t *text = json_object_get(content, "text");
    if (!json_is_string(name) || !json_is_string(text) ||
        strlen(json_string_value(name)) != json_string_length(name))
        return s_malformed(o);
    if (o->truncated)
        return 0;
    s_before_output(o);
    const char *s = json_string_value(text);
    size_t len = json_string_length(text);
    json_t *last =
        o->merge_streams ? s_last_stream(o, json_string_value(name)) : NULL;
    /* A new stream output: the object, its three members and strings. */
    size_t fixed = last ? 0
                        : COST_OUTPUT + COST_NODE + COST_CONTAINER +
                              3 * COST_MEMBER + 3 * COST_NODE +
                              strlen("output_typestreamnametext") +
                              kb_output_esc_len(json_string_value(name),
                                                json_string_length(name));
    size_t esc = kb_output_esc_len(s, len);
    size_t cost = kb_output_add_sat(fixed, esc);
    size_t keep = len;
    bool cut = false;
    if (s_over(o, cost)) {
        size_t room = s_room(o);
        keep = room > fixed ? kb_output_esc_prefix(s, len, room - fixed) : 0;
        cost = fixed + kb_output_esc_len(s, keep);
        cut = true;
    }
    if (keep > 0 || (!cut && len == 0 && !last)) {
        if (last) {
            s_tail_append(o, last, s, keep);
        } else {
            s_flush(o);
            json_array_append_new(
                o->outputs, json_pack("{s:s, s:O, s:s%}", "output_type",
                                      "stream", "name", name, "text", s, keep));
        }
        o->bytes += cost;
    }
    if (cut)
        s_truncate(o);
    return 0;
}

static int
s_on_display(kb_output_t *o, const char *type, json_t *content)
{
    json_t *data, *meta, *count = NULL;
    const char *id;
    if (s_display_parts(content, &data, &meta) || s_display_id(content, &id))
        return s_malformed(o);
    bool result = !strcmp(type, "execute_result");
    if (result) {
        count = json_object_get(content, "execution_count");
        if (!json_is_integer(count) && !json_is_null(count))
            return s_malformed(o);
        if (json_is_integer(count) && (json_integer_value(count) < 0 ||
                                       json_integer_value(count) > INT32_MAX))
            return s_malformed(o);
        if (json_is_integer(count))
            o->execution_count = (int)json_integer_value(count);
    }
    if (o->truncated)
        return 0;
    /* nbclient order: update the known displays, then the delayed clear,
     * then append and register. */
    if (id)
        s_update(o, id, data, meta);
    if (o->truncated)
        return 0;
    s_before_output(o);
    json_t *out = json_object();
    json_object_set_new(out, "output_type", json_string(type));
    json_object_set_new(out, "data", json_deep_copy(data));
    json_object_set_new(out, "metadata",
                        meta ? json_deep_copy(meta) : json_object());
    if (result)
        json_object_set_new(out, "execution_count", json_deep_copy(count));
    size_t cost = kb_output_cost(out);
    if (s_over(o, cost)) {
        json_decref(out);
        s_truncate(o);
        return 0;
    }
    s_flush(o);
    json_array_append_new(o->outputs, out);
    o->bytes += cost;
    if (id)
        s_register(o, id, out);
    return 0;
}

static int
s_on_update(kb_output_t *o, json_t *content)
{
    json_t *data, *meta;
    const char *id;
    if (s_display_parts(content, &data, &meta) || s_display_id(content, &id) ||
        !id)
        return s_malformed(o);
    if (o->truncated)
        return 0;
    s_flush(o);
    s_update(o, id, data, meta);
    return 0;
}

static int
s_on_error(kb_output_t *o, json_t *content)
{
    json_t *ename = json_object_get(content, "ename");
    json_t *evalue = json_object_get(content, "evalue");
    json_t *tb = json_object_get(content, "traceback");
    size_t i;
    json_t *x;
    if (!json_is_string(ename) || !json_is_string(evalue) || !json_is_array(tb))
        return s_malformed(o);
    json_array_foreach(tb, i, x) if (!json_is_string(x)) return s_malformed(o);
    if (o->truncated)
        return 0;
    s_before_output(o);
    json_t *out =
        json_pack("{s:s, s:O, s:O, s:o}", "output_type", "error", "ename",
                  ename, "evalue", evalue, "traceback", json_deep_copy(tb));
    size_t cost = kb_output_cost(out);
    o->saw_error = true;
    if (s_over(o, cost)) {
        json_decref(out);
        s_truncate(o);
        return 0;
    }
    s_flush(o);
    json_array_append_new(o->outputs, out);
    o->bytes += cost;
    return 0;
}

static int
s_on_clear(kb_output_t *o, json_t *content)
{
    json_t *wait = json_object_get(content, "wait");
    if (wait && !json_is_boolean(wait) && !json_is_integer(wait) &&
        !json_is_null(wait))
        return s_malformed(o);
    if (o->truncated)
        return 0;
    bool w = json_is_true(wait) ||
             (json_is_integer(wait) && json_integer_value(wait) != 0);
    if (w)
        o->clear_pending = true;
    else
        s_clear(o);
    return 0;
}

static int
s_on_count(kb_output_t *o, json_t *content, bool required)
{
    json_t *count = json_object_get(content, "execution_count");
    if (json_is_integer(count)) {
        json_int_t v = json_integer_value(count);
        if (v < 0 || v > INT32_MAX)
            return s_malformed(o);
        o->execution_count = (int)v;
    } else if (required || (count && !json_is_null(count))) {
        return s_malformed(o);
    }
    return 0;
}

static int
s_on_reply(kb_output_t *o, json_t *content)
{
    json_t *status = json_object_get(content, "status");
    if (!json_is_string(status))
        return s_malformed(o);
    if (s_on_count(o, content, false))
        return -1;
    kb_output_set_status(o, json_string_value(status));
    kb_output_set_payload(o, json_object_get(content, "payload"));
    kb_output_set_user_expressions(
        o, json_object_get(content, "user_expressions"));
    return 0;
}

bool
kb_output_is_output_type(const char *msg_type)
{
    static const char *const types[] = {"stream", "display_data",
                                        "execute_result", "update_display_data",
                                        "error"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (msg_type && !strcmp(msg_type, types[i]))
            return true;
    return false;
}

int
kb_output_feed(kb_output_t *o, const char *msg_type, json_t *content)
{
    if (!o || !msg_type)
        return -1;
    if (!strcmp(msg_type, "status") || !strncmp(msg_type, "comm_", 5))
        return 0;
    static const char *const known[] = {
        "stream", "display_data", "execute_result", "update_display_data",
        "error",  "clear_output", "execute_input",  "execute_reply"};
    bool is_known = false;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(msg_type, known[i]))
            is_known = true;
    if (!is_known)
        return 0;
    if (!json_is_object(content))
        return s_malformed(o);
    if (!strcmp(msg_type, "stream"))
        return s_on_stream(o, content);
    if (!strcmp(msg_type, "display_data") ||
        !strcmp(msg_type, "execute_result"))
        return s_on_display(o, msg_type, content);
    if (!strcmp(msg_type, "update_display_data"))
        return s_on_update(o, content);
    if (!strcmp(msg_type, "error"))
        return s_on_error(o, content);
    if (!strcmp(msg_type, "clear_output"))
        return s_on_clear(o, content);
    if (!strcmp(msg_type, "execute_input"))
        return s_on_count(o, content, true);
    return s_on_reply(o, content);
}

/* --- accessors --------------------------------------------------------- */

json_t *
kb_output_outputs(const kb_output_t *o)
{
    s_flush(o);
    return o->outputs;
}

void
kb_output_set_execution_count(kb_output_t *o, int count)
{
    o->execution_count = count;
}

int
kb_output_execution_count(const kb_output_t *o)
{
    return o->execution_count;
}

void
kb_output_set_status(kb_output_t *o, const char *status)
{
    free(o->status);
    o->status = status ? xstrdup(status) : NULL;
}

const char *
kb_output_status(const kb_output_t *o)
{
    return o->status;
}

void
kb_output_set_payload(kb_output_t *o, json_t *payload)
{
    json_decref(o->payload);
    /* Only well-formed payloads (objects with a source) are kept. */
    o->payload = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(payload, i, p)
    {
        if (json_is_object(p) && json_is_string(json_object_get(p, "source")))
            json_array_append(o->payload, p);
    }
}

json_t *
kb_output_payload(const kb_output_t *o)
{
    return o->payload;
}

void
kb_output_set_user_expressions(kb_output_t *o, json_t *expressions)
{
    if (!json_is_object(expressions))
        return;
    json_decref(o->user_expressions);
    o->user_expressions = json_deep_copy(expressions);
}

json_t *
kb_output_user_expressions(const kb_output_t *o)
{
    return o->user_expressions;
}

void
kb_output_set_interrupted(kb_output_t *o, bool yes)
{
    o->interrupted = yes;
}

bool
kb_output_interrupted(const kb_output_t *o)
{
    return o->interrupted;
}

void
kb_output_set_timed_out(kb_output_t *o, bool yes)
{
    o->timed_out = yes;
}

bool
kb_output_timed_out(const kb_output_t *o)
{
    return o->timed_out;
}

void
kb_output_set_died(kb_output_t *o, const char *reason)
{
    o->died = true;
    free(o->death_reason);
    o->death_reason = reason ? xstrdup(reason) : NULL;
}

bool
kb_output_died(const kb_output_t *o)
{
    return o->died;
}

const char *
kb_output_death_reason(const kb_output_t *o)
{
    return o->died ? o->death_reason : NULL;
}

void
kb_output_set_duration_ms(kb_output_t *o, int64_t ms)
{
    o->duration_ms = ms;
}

int64_t
kb_output_duration_ms(const kb_output_t *o)
{
    return o->duration_ms;
}

size_t
kb_output_malformed(const kb_output_t *o)
{
    return o->malformed;
}

void
kb_output_mark_truncated(kb_output_t *o)
{
    s_truncate(o);
}

bool
kb_output_truncated(const kb_output_t *o)
{
    return o->truncated;
}

size_t
kb_output_bytes(const kb_output_t *o)
{
    return o->bytes;
}

json_t *
kb_output_to_json(const kb_output_t *o)
{
    const char *status;
    if (o->died)
        status = "died";
    else if (o->timed_out)
        status = "timeout";
    else if (o->interrupted)
        status = "interrupted";
    else if (o->status)
        status = !strcmp(o->status, "ok") ? "ok" : "error";
    else
        status = o->saw_error ? "error" : "ok";
    json_t *j = json_object();
    json_object_set_new(j, "status", json_string(status));
    json_object_set_new(j, "execution_count",
                        o->execution_count >= 0
                            ? json_integer(o->execution_count)
                            : json_null());
    json_object_set(j, "outputs", kb_output_outputs(o));
    json_object_set_new(j, "duration_ms", json_integer(o->duration_ms));
    if (o->died)
        json_object_set_new(
            j, "error",
            json_string(o->death_reason ? o->death_reason : "kernel died"));
    return j;
}
