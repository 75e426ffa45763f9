/*
 * ag_provider_http: one turn over HTTP with retries: send the request,
 * feed the body to the wire format (SSE or one JSON body), judge the
 * outcome (done, retry, fail) and wait before the next try.
 */
#include "agent/llm/ag_provider_impl.h"

#include "common/clock.h"
#include "common/jget.h"
#include "common/log.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S_RETRY_AFTER_CAP_MS 60000L
#define S_BACKOFF_CAP_MS 30000L

/* ---- the HTTP turn with retries --------------------------------------- */

static int
s_on_sse(const char *type, const char *data, size_t len, const char *id,
         void *arg)
{
    (void)id;
    ag_turn_state_t *st = arg;
    if (st->done)
        return 0;
    return st->p->ops->on_event(st, type, data, len, &st->err) < 0 ? 1 : 0;
}

static int
s_sink(const char *data, size_t len, void *arg)
{
    ag_turn_state_t *st = arg;
    if (!st->sse && !st->json_body) {
        /* First bytes: a server that ignores "stream" sends plain JSON. */
        size_t i = 0;
        while (i < len && (data[i] == ' ' || data[i] == '\n' ||
                           data[i] == '\r' || data[i] == '\t'))
            i++;
        if (i < len && data[i] == '{')
            st->json_body = 1;
        else
            st->sse = ag_sse_new(s_on_sse, st, 0);
    }
    if (st->json_body)
        return buf_append(&st->raw, data, len) < 0;
    return ag_sse_feed(st->sse, data, len, &st->err) < 0 ? 1 : 0;
}

/* The server's own message from an error body, else a snippet of it. */
static void
s_server_message(const ag_http_resp_t *r, char *out, size_t size)
{
    json_t *j =
        json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, NULL);
    const char *m = NULL;
    if (j) {
        const json_t *e = json_object_get(j, "error");
        m = json_is_string(e) ? json_string_value(e)
                              : jget_str(e, "message", NULL);
        if (!m)
            m = jget_str(j, "message", NULL);
        if (!m)
            m = jget_str(j, "detail", NULL);
    }
    if (m)
        ag_snippet(m, strlen(m), 400, out, size);
    else if (r->body.len)
        ag_snippet(buf_cstr(&r->body), r->body.len, 200, out, size);
    else
        snprintf(out, size, "(empty response body)");
    json_decref(j);
}

enum s_outcome { S_DONE = 0, S_RETRY = 1, S_FAIL = -1 };

/* What a retryable failure was, for the final message. */
typedef struct s_last {
    char what[640]; /* "rate limited (HTTP 429)" */
    char msg[480];  /* the server's or curl's last message */
    long wait_ms;   /* server-requested wait, -1 when none */
} s_last_t;

static enum s_outcome
s_judge(ag_provider_t *p, const char *url, ag_turn_state_t *st,
        ag_http_resp_t *r, s_last_t *last, err_t *err)
{
    const char *name = p->ops->name;
    char surl[400];
    char msg[480];
    ag_safe_url(url, surl, sizeof surl);
    last->wait_ms = -1;

    switch (r->how) {
    case AG_HTTP_INTERRUPTED:
        err_set(err, ERR_INTERRUPTED, "%s: interrupted", name);
        return S_FAIL;
    case AG_HTTP_ABORTED:
        if (st->server_error && st->retryable) {
            snprintf(last->what, sizeof last->what, "the server reported %s",
                     st->srv_type);
            snprintf(last->msg, sizeof last->msg, "%s", st->srv_msg);
            return S_RETRY;
        }
        if (err)
            *err = st->err;
        return S_FAIL;
    case AG_HTTP_TOO_LARGE:
        err_set(err, ERR_PROVIDER,
                "%s: the response from %s was too large (over %zu bytes); "
                "aborted",
                name, surl, r->received);
        return S_FAIL;
    case AG_HTTP_CONNECT:
        snprintf(last->what, sizeof last->what, "could not reach %.400s", surl);
        snprintf(last->msg, sizeof last->msg, "%s", r->detail);
        return S_RETRY;
    case AG_HTTP_TIMEOUT:
    case AG_HTTP_CUT:
        if (st->delivered) {
            err_set(err, ERR_PROVIDER,
                    "%s: the response stream was cut off mid-message after "
                    "%zu bytes (%s); the partial reply was discarded, try "
                    "again",
                    name, r->received, r->detail);
            return S_FAIL;
        }
        snprintf(last->what, sizeof last->what, "%s",
                 r->how == AG_HTTP_TIMEOUT
                     ? "timed out"
                     : "the connection dropped before the reply completed");
        snprintf(last->msg, sizeof last->msg, "%s", r->detail);
        return S_RETRY;
    case AG_HTTP_OK:
        break;
    }

    long s = r->status;
    if (s >= 200 && s < 300) {
        if (p->stream && !st->json_body) {
            int pending = st->sse ? ag_sse_finish(st->sse) : 0;
            int complete = st->done || st->stop_seen;
            if (complete)
                return S_DONE;
            if (st->delivered) {
                err_set(err, ERR_PROVIDER,
                        "%s: the response stream was cut off mid-message "
                        "(the server closed it after %zu bytes without "
                        "finishing%s); the partial reply was discarded, try "
                        "again",
                        name, r->received, pending ? ", inside an event" : "");
                return S_FAIL;
            }
            snprintf(last->what, sizeof last->what,
                     "the response stream ended before the reply");
            snprintf(last->msg, sizeof last->msg, "%zu bytes received",
                     r->received);
            return S_RETRY;
        }
        const buf_t *b = st->json_body ? &st->raw : &r->body;
        json_error_t je;
        json_t *j = json_loadb(b->data ? b->data : "", b->len, 0, &je);
        if (!json_is_object(j)) {
            char why[200];
            snprintf(why, sizeof why, "line %d column %d: %s", je.line,
                     je.column, j ? "not an object" : je.text);
            json_decref(j);
            ag_ts_malformed(st, "in the response body", buf_cstr(b), b->len,
                            why, err);
            return S_FAIL;
        }
        int rc = p->ops->on_body(st, j, err);
        json_decref(j);
        if (rc < 0) {
            if (st->server_error && st->retryable) {
                snprintf(last->what, sizeof last->what,
                         "the server reported %s", st->srv_type);
                snprintf(last->msg, sizeof last->msg, "%s", st->srv_msg);
                return S_RETRY;
            }
            return S_FAIL;
        }
        return S_DONE;
    }

    s_server_message(r, msg, sizeof msg);
    last->wait_ms = r->retry_after_ms;
    if (s == 429 || s == 500 || s == 502 || s == 503 || s == 504 || s == 529) {
        snprintf(last->what, sizeof last->what, "%s (HTTP %ld)",
                 s == 429   ? "rate limited"
                 : s == 529 ? "overloaded"
                            : "server error",
                 s);
        snprintf(last->msg, sizeof last->msg, "%s", msg);
        return S_RETRY;
    }
    if (s == 401) {
        err_set(err, ERR_PROVIDER,
                "%s: authentication failed (HTTP 401): check %s", name,
                p->ops->key_env);
        return S_FAIL;
    }
    if (s == 403) {
        err_set(err, ERR_PROVIDER,
                "%s: permission denied (HTTP 403): check %s and your access "
                "to model '%s'; server said: %s",
                name, p->ops->key_env, p->model, msg);
        return S_FAIL;
    }
    if (s == 404) {
        err_set(err, ERR_PROVIDER,
                "%s: not found (HTTP 404) at %s: %s (check the model name "
                "'%s' and %s)",
                name, surl, msg, p->model, p->ops->base_env);
        return S_FAIL;
    }
    if (s >= 400 && s < 500) {
        err_set(err, ERR_PROVIDER,
                "%s: the server rejected the request (HTTP %ld): %s", name, s,
                msg);
        return S_FAIL;
    }
    err_set(err, ERR_PROVIDER, "%s: unexpected HTTP %ld from %s: %s", name, s,
            surl, msg);
    return S_FAIL;
}

/* Sleep `ms`, waking early when cancelled. Returns -1 when cancelled. */
static int
s_sleep(const ag_provider_t *p, long ms)
{
    int64_t end = clock_mono_ms() + ms;
    for (;;) {
        if (p->cancel && atomic_load(p->cancel))
            return -1;
        int64_t left = end - clock_mono_ms();
        if (left <= 0)
            return 0;
        if (left > 50)
            left = 50;
        struct timespec ts = {0, (long)left * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static long
s_backoff_ms(const ag_provider_t *p, int try, long wait_ms)
{
    if (wait_ms >= 0)
        return wait_ms < S_RETRY_AFTER_CAP_MS ? wait_ms : S_RETRY_AFTER_CAP_MS;
    long d = p->retry_base_ms;
    for (int i = 1; i < try && d < S_BACKOFF_CAP_MS; i++)
        d *= 2;
    if (d > S_BACKOFF_CAP_MS)
        d = S_BACKOFF_CAP_MS;
    /* "Equal jitter": half fixed, half random. */
    return d / 2 + (long)randombytes_uniform((uint32_t)(d / 2 + 1));
}

int
ag_provider_http_turn(ag_provider_t *p, const ag_conv_t *conv,
                      const json_t *tools, const ag_stream_cb_t *cb,
                      ag_turn_t *out, err_t *err)
{
    ag_request_t req = {0};
    ag_http_resp_t resp;
    ag_turn_state_t st;
    s_last_t last = {"", "", -1};
    int rc = -1;
    ag_http_resp_init(&resp);
    ag_ts_init(&st, p, cb);
    if (!p->http && !(p->http = ag_http_new())) {
        err_set(err, ERR_PROVIDER, "%s: cannot initialise libcurl",
                p->ops->name);
        goto out;
    }
    if (p->ops->request(p, conv, tools, &req, err) < 0)
        goto out;
    ag_http_opts_t opts = {.read_timeout_s = p->read_timeout_s,
                           .cancel = p->cancel};
    for (int try = 1;; try++) {
        ag_ts_release(&st);
        ag_ts_init(&st, p, cb);
        p->total.requests++;
        log_debug("%s: POST %s (try %d of %d)", p->ops->name, req.url, try,
                  p->max_tries);
        ag_http_post(p->http, &opts, req.url, (const char *const *)req.headers,
                     req.body, p->stream ? s_sink : NULL, &st, &resp);
        enum s_outcome o = s_judge(p, req.url, &st, &resp, &last, err);
        if (o == S_DONE) {
            ag_ts_to_turn(&st, out);
            rc = 0;
            break;
        }
        if (o == S_FAIL)
            break;
        if (try >= p->max_tries) {
            err_set(err, ERR_PROVIDER, "%s: %s after %d tr%s; last message: %s",
                    p->ops->name, last.what, try, try == 1 ? "y" : "ies",
                    last.msg);
            break;
        }
        long wait = s_backoff_ms(p, try, last.wait_ms);
        log_info("%s: %s; retrying in %ld ms (try %d of %d)", p->ops->name,
                 last.what, wait, try + 1, p->max_tries);
        if (s_sleep(p, wait) < 0) {
            err_set(err, ERR_INTERRUPTED, "%s: interrupted", p->ops->name);
            break;
        }
    }
out:
    ag_ts_release(&st);
    ag_http_resp_release(&resp);
    ag_request_release(&req);
    return rc;
}
