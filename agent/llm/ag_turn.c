/* One turn's data (see ag_provider_impl.h): the HTTP request built for
 * it, the turn assembled from what the server sends, and the short, safe
 * texts that messages about it quote. Calls nothing of ag_provider*.c:
 * provider -> provider_http -> turn is one way. */
#include "agent/llm/ag_provider_impl.h"

#include "common/secret.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
ag_request_release(ag_request_t *r)
{
    free(r->url);
    free(r->body);
    for (size_t i = 0; i < sizeof r->headers / sizeof r->headers[0]; i++) {
        secret_free(r->headers[i]); /* header lines may hold the key */
    }
    memset(r, 0, sizeof *r);
}

/* Copy at most `max` bytes of s into out, replacing control bytes and
 * stopping at a character boundary; "…" marks a cut. */
void
ag_snippet(const char *s, size_t len, size_t max, char *out, size_t size)
{
    size_t o = 0;
    size_t n = utf8_cut(s, len, max);
    for (size_t i = 0; i < n && o + 4 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    if (n < len && o + 4 < size) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* `url` parsed by libcurl (the parser that will send the request), or
 * NULL when it does not parse. */
static CURLU *
s_parse_url(const char *url)
{
    CURLU *u = curl_url();
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        curl_url_cleanup(u), u = NULL;
    return u;
}

/* URL without its user, password and login options, for messages. The
 * parse is libcurl's, so an '@' in the query or fragment is not taken
 * for the end of credentials. */
void
ag_safe_url(const char *url, char *out, size_t size)
{
    CURLU *u = s_parse_url(url);
    char *clean = NULL;
    if (u) {
        curl_url_set(u, CURLUPART_USER, NULL, 0);
        curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
        curl_url_set(u, CURLUPART_OPTIONS, NULL, 0);
        curl_url_get(u, CURLUPART_URL, &clean, 0);
    }
    snprintf(out, size, "%s", clean ? clean : "(a URL that does not parse)");
    curl_free(clean);
    curl_url_cleanup(u);
}

/* Is `url` an http or https URL that libcurl parses? */
bool
ag_url_is_http(const char *url)
{
    CURLU *u = s_parse_url(url);
    char *scheme = NULL;
    if (u)
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    bool good =
        scheme && (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0);
    curl_free(scheme);
    curl_url_cleanup(u);
    return good;
}

/* ---- turn assembly (shared by the wire formats) ----------------------- */

void
ag_ts_init(ag_turn_state_t *st, ag_provider_t *p, const ag_stream_cb_t *cb)
{
    memset(st, 0, sizeof *st);
    st->p = p;
    st->cb = cb;
    buf_init(&st->text, 0);
    buf_init(&st->raw, 0);
}

void
ag_ts_release(ag_turn_state_t *st)
{
    buf_release(&st->text);
    buf_release(&st->raw);
    for (size_t i = 0; i < st->ncalls; i++) {
        buf_release(&st->calls[i].id);
        buf_release(&st->calls[i].name);
        buf_release(&st->calls[i].args);
    }
    free(st->calls);
    ag_sse_destroy(&st->sse);
    st->calls = NULL;
    st->ncalls = 0;
}

void
ag_ts_text(ag_turn_state_t *st, const char *s, size_t len)
{
    if (!len)
        return;
    buf_append(&st->text, s, len);
    st->delivered = 1;
    if (st->cb && st->cb->on_text_delta)
        st->cb->on_text_delta(s, len, st->cb->arg);
}

static ag_call_acc_t *
s_call_slot(ag_turn_state_t *st, size_t index, err_t *err)
{
    if (index >= AG_MAX_CALL_INDEX) {
        err_set(err, ERR_PROVIDER,
                "%s: the server sent tool call index %zu (at most %d are "
                "supported)",
                st->p->ops ? st->p->ops->name : "replay", index,
                AG_MAX_CALL_INDEX);
        return NULL;
    }
    if (index >= st->ncalls) {
        st->calls = xrealloc(st->calls, (index + 1) * sizeof *st->calls);
        for (size_t i = st->ncalls; i <= index; i++) {
            memset(&st->calls[i], 0, sizeof st->calls[i]);
            buf_init(&st->calls[i].id, 0);
            buf_init(&st->calls[i].name, 0);
            buf_init(&st->calls[i].args, 0);
        }
        st->ncalls = index + 1;
    }
    ag_call_acc_t *c = &st->calls[index];
    c->started = 1;
    return c;
}

int
ag_ts_call(ag_turn_state_t *st, size_t index, const char *id, const char *name,
           err_t *err)
{
    ag_call_acc_t *c = s_call_slot(st, index, err);
    if (!c)
        return -1;
    if (id && *id && c->id.len == 0)
        buf_puts(&c->id, id);
    if (name && *name && c->name.len == 0) {
        buf_puts(&c->name, name);
        st->delivered = 1;
        if (st->cb && st->cb->on_tool_call_start)
            st->cb->on_tool_call_start(name, st->cb->arg);
    }
    return 0;
}

int
ag_ts_call_args(ag_turn_state_t *st, size_t index, const char *frag, size_t len,
                err_t *err)
{
    ag_call_acc_t *c = s_call_slot(st, index, err);
    if (!c)
        return -1;
    buf_append(&c->args, frag, len);
    return 0;
}

void
ag_ts_stop(ag_turn_state_t *st, enum ag_stop stop)
{
    st->stop = stop;
    st->stop_seen = 1;
}

int
ag_ts_server_error(ag_turn_state_t *st, const char *type, const char *message,
                   err_t *err)
{
    static const char *const transient[] = {
        "overloaded_error", "api_error",    "rate_limit_error",
        "server_error",     "overloaded",   "rate_limit_exceeded",
        "internal_error",   "timeout_error"};
    const char *name = st->p->ops ? st->p->ops->name : "replay";
    st->server_error = 1;
    st->retryable = 0;
    for (size_t i = 0; type && i < sizeof transient / sizeof *transient; i++)
        if (strcmp(type, transient[i]) == 0)
            st->retryable = !st->delivered;
    char msg[400];
    ag_snippet(message ? message : "", message ? strlen(message) : 0, 300, msg,
               sizeof msg);
    snprintf(st->srv_type, sizeof st->srv_type, "%s", type ? type : "error");
    snprintf(st->srv_msg, sizeof st->srv_msg, "%s", msg);
    if (st->delivered)
        return err_set(err, ERR_PROVIDER,
                       "%s: the server reported %s in the middle of the "
                       "reply (partial reply discarded): %s",
                       name, type ? type : "an error", msg);
    return err_set(err, ERR_PROVIDER, "%s: the server reported %s: %s", name,
                   type ? type : "an error", msg);
}

int
ag_ts_malformed(ag_turn_state_t *st, const char *where, const char *data,
                size_t len, const char *why, err_t *err)
{
    char snip[200];
    ag_snippet(data, len, 120, snip, sizeof snip);
    return err_set(err, ERR_PROVIDER,
                   "%s: the server sent malformed JSON %s (%s): '%s'",
                   st->p->ops ? st->p->ops->name : "replay", where, why, snip);
}

/* Move the assembled turn into `out`. */
void
ag_ts_to_turn(ag_turn_state_t *st, ag_turn_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < st->ncalls; i++)
        n += st->calls[i].started && st->calls[i].name.len > 0;
    ag_tool_call_t *v = n ? xcalloc(n, sizeof *v) : NULL;
    size_t k = 0;
    for (size_t i = 0; i < st->ncalls; i++) {
        ag_call_acc_t *c = &st->calls[i];
        if (!c->started || c->name.len == 0)
            continue;
        v[k].id =
            c->id.len ? buf_detach(&c->id, NULL) : xasprintf("call_%zu", k);
        v[k].name = buf_detach(&c->name, NULL);
        v[k].arguments =
            c->args.len ? buf_detach(&c->args, NULL) : xstrdup("{}");
        k++;
    }
    out->text = buf_detach(&st->text, NULL);
    out->calls = v;
    out->ncalls = n;
    out->stop = st->stop_seen ? st->stop : (n ? AG_STOP_TOOL_USE : AG_STOP_END);
    out->usage = st->usage;
    out->usage.turns = 1;
}
