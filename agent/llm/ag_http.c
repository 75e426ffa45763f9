#include "agent/llm/ag_http.h"

#include "common/secret.h"
#include "common/xalloc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_ERR_BODY_MAX (64u * 1024)
#define S_POLL_MS 100

struct ag_http {
    CURL *easy;   /* reused across requests (keeps connections alive) */
    CURLM *multi; /* drives the easy handle so that cancel is prompt */
};

/* State of one transfer, shared by the curl callbacks. */
typedef struct s_xfer {
    CURL *easy;                 /* borrowed; the transfer's handle */
    const ag_http_opts_t *opts; /* borrowed */
    ag_http_resp_t *resp;       /* borrowed */
    ag_http_sink_fn sink;       /* optional */
    void *arg;                  /* for sink */
    size_t max;                 /* cap on the body */
    int too_large;              /* the cap was passed */
    int aborted;                /* the sink asked to stop */
    int cancelled;              /* the cancel flag was seen */
} s_xfer_t;

static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void
s_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

ag_http_t *
ag_http_new(void)
{
    pthread_once(&s_once, s_global_init);
    ag_http_t *h = xcalloc(1, sizeof *h);
    h->easy = curl_easy_init();
    h->multi = curl_multi_init();
    if (!h->easy || !h->multi) {
        ag_http_destroy(&h);
        return NULL;
    }
    return h;
}

void
ag_http_destroy(ag_http_t **p)
{
    if (!p || !*p)
        return;
    ag_http_t *h = *p;
    if (h->easy)
        curl_easy_cleanup(h->easy);
    if (h->multi)
        curl_multi_cleanup(h->multi);
    free(h);
    *p = NULL;
}

void
ag_http_resp_init(ag_http_resp_t *r)
{
    memset(r, 0, sizeof *r);
    r->retry_after_ms = -1;
    buf_init(&r->body, 0);
}

void
ag_http_resp_release(ag_http_resp_t *r)
{
    buf_release(&r->body);
}

static int
s_cancelled(const s_xfer_t *x)
{
    return x->opts->cancel && atomic_load(x->opts->cancel);
}

/* Status, content type and retry delay of the response, from what libcurl
 * parsed: CURLINFO_RETRY_AFTER reads both forms of Retry-After (seconds
 * and HTTP-date); the non-standard retry-after-ms (OpenAI, Anthropic) is
 * finer and wins when present. */
static void
s_response_info(CURL *e, ag_http_resp_t *r)
{
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
    const char *ct = NULL;
    if (curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
        snprintf(r->content_type, sizeof r->content_type, "%s", ct);
    struct curl_header *h = NULL;
    r->retry_after_ms = -1;
    if (curl_easy_header(e, "retry-after-ms", 0, CURLH_HEADER, -1, &h) ==
        CURLHE_OK) {
        char *end = NULL;
        double ms = strtod(h->value, &end);
        if (end != h->value && ms >= 0 && ms < 1e9)
            r->retry_after_ms = (long)ms;
    }
    curl_off_t secs = 0;
    if (r->retry_after_ms < 0 &&
        curl_easy_header(e, "retry-after", 0, CURLH_HEADER, -1, &h) ==
            CURLHE_OK &&
        curl_easy_getinfo(e, CURLINFO_RETRY_AFTER, &secs) == CURLE_OK &&
        secs >= 0 && secs < 1000000)
        r->retry_after_ms = (long)secs * 1000;
}

static size_t
s_on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    s_xfer_t *x = arg;
    size_t n = size * nmemb;
    ag_http_resp_t *r = x->resp;
    if (s_cancelled(x)) {
        x->cancelled = 1;
        return 0;
    }
    if (r->received + n > x->max || r->received + n < r->received) {
        x->too_large = 1;
        return 0;
    }
    r->received += n;
    if (!r->status) /* the headers are complete once the body starts */
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &r->status);
    int ok2xx = r->status >= 200 && r->status < 300;
    if (ok2xx && x->sink) {
        if (x->sink(data, n, x->arg)) {
            x->aborted = 1;
            return 0;
        }
        return n;
    }
    if (!ok2xx) {
        /* Keep the first 64 KiB of an error body; drop the rest. */
        size_t room =
            S_ERR_BODY_MAX > r->body.len ? S_ERR_BODY_MAX - r->body.len : 0;
        buf_append(&r->body, data, n < room ? n : room);
        return n;
    }
    buf_append(&r->body, data, n);
    return n;
}

static int
s_on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
              curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    s_xfer_t *x = arg;
    if (s_cancelled(x)) {
        x->cancelled = 1;
        return 1;
    }
    return 0;
}

static void
s_classify(s_xfer_t *x, CURLcode rc, const char *errbuf)
{
    ag_http_resp_t *r = x->resp;
    const char *what = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    snprintf(r->detail, sizeof r->detail, "%s", what);
    if (x->cancelled || (rc != CURLE_OK && s_cancelled(x))) {
        r->how = AG_HTTP_INTERRUPTED;
        snprintf(r->detail, sizeof r->detail, "interrupted");
    } else if (x->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
        r->how = AG_HTTP_TOO_LARGE;
    } else if (x->aborted) {
        r->how = AG_HTTP_ABORTED;
    } else if (rc == CURLE_OK) {
        r->how = AG_HTTP_OK;
        r->detail[0] = '\0';
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        r->how = AG_HTTP_TIMEOUT;
    } else if (r->status == 0) {
        r->how = AG_HTTP_CONNECT;
    } else {
        r->how = AG_HTTP_CUT;
    }
}

int
ag_http_post(ag_http_t *h, const ag_http_opts_t *opts, const char *url,
             const char *const *headers, const char *body, ag_http_sink_fn sink,
             void *arg, ag_http_resp_t *resp)
{
    static const ag_http_opts_t defaults = {0};
    if (!opts)
        opts = &defaults;
    buf_release(&resp->body);
    ag_http_resp_init(resp);
    s_xfer_t x = {
        .easy = h->easy, .opts = opts, .resp = resp, .sink = sink, .arg = arg};
    x.max =
        opts->max_response_bytes ? opts->max_response_bytes : 32u * 1024 * 1024;
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hl = NULL;
    CURLcode rc = CURLE_OK;
    CURL *e = h->easy;
    int added = 0;

    for (size_t i = 0; headers && headers[i]; i++) {
        struct curl_slist *t = curl_slist_append(hl, headers[i]);
        if (!t) {
            rc = CURLE_OUT_OF_MEMORY;
            goto done;
        }
        hl = t;
    }
    /* Disable "Expect: 100-continue" so large bodies go out at once. */
    hl = curl_slist_append(hl, "Expect:");

    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "jupyter-agent");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     opts->connect_timeout_ms ? opts->connect_timeout_ms
                                              : 10000L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                     opts->read_timeout_s ? opts->read_timeout_s : 300L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, s_on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, s_on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    /* Only http and https, never a redirect to anything else. */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);

    if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
        rc = CURLE_FAILED_INIT;
        goto done;
    }
    added = 1;
    for (;;) {
        int running = 0;
        if (curl_multi_perform(h->multi, &running) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        if (!running) {
            int left;
            CURLMsg *m;
            rc = CURLE_GOT_NOTHING;
            while ((m = curl_multi_info_read(h->multi, &left)))
                if (m->msg == CURLMSG_DONE && m->easy_handle == e)
                    rc = m->data.result;
            break;
        }
        if (s_cancelled(&x)) {
            x.cancelled = 1;
            rc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        if (curl_multi_poll(h->multi, NULL, 0, S_POLL_MS, NULL) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
    }
done:
    if (added) {
        s_response_info(e, resp);
        curl_multi_remove_handle(h->multi, e);
    }
    for (struct curl_slist *l = hl; l; l = l->next)
        secret_wipe(l->data); /* curl's copies of the header lines: the key */
    curl_slist_free_all(hl);
    /* The error buffer lives on this stack frame: detach it. */
    curl_easy_setopt(h->easy, CURLOPT_ERRORBUFFER, NULL);
    s_classify(&x, rc, errbuf);
    return resp->how == AG_HTTP_OK ? 0 : -1;
}
