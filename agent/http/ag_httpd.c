#include "agent/http/ag_httpd.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

#define SWEEP_MS 250

/* Where a connection is in its current request. */
typedef enum s_phase {
    P_HEADERS, /* waiting for (the rest of) a request's headers */
    P_BODY,    /* headers in, receiving the body */
    P_BUSY     /* the request is in: being handled or answered */
} s_phase_t;

/* One TCP connection (MHD's socket context), in d->conns. Guarded by
 * d->lock. */
typedef struct s_conn {
    struct s_conn *prev, *next;
    int fd;                      /* MHD's: shut down (never closed) by us */
    char peer[INET6_ADDRSTRLEN]; /* address as text */
    s_phase_t phase;
    int64_t since_ms; /* when the current request began */
    uint64_t seq;     /* accept order: ties of since_ms */
    bool served;      /* an answer was sent on it */
    bool cut;         /* shut down by us: MHD closes it next */
} s_conn_t;

typedef struct s_kv {
    char *name, *value;
} s_kv_t;

typedef struct s_kvs {
    s_kv_t *v;
    size_t n, cap;
} s_kvs_t;

/* Where a request is (see ag_httpd.h for who owns it in each). */
typedef enum s_state {
    S_RECEIVING, /* the event loop's */
    S_WORKING,   /* queued or handled: a worker's */
    S_BACK       /* answered by the worker: the event loop's again */
} s_state_t;

/* On a worker's stack while it handles a request. */
typedef struct s_job {
    bool answered;
} s_job_t;

struct ag_httpd_req {
    ag_httpd_t *d;
    struct MHD_Connection *c;
    ag_httpd_req_t *qnext; /* in d->queue */
    s_state_t state;
    s_job_t *job; /* while a worker has it */
    char *method, *path;
    char peer[INET6_ADDRSTRLEN];
    s_kvs_t headers, args;
    buf_t body;
    size_t seen;     /* body bytes offered, kept or not */
    size_t reserved; /* of d->in_flight */
    bool too_big, busy;
    /* the answer */
    bool answered;
    unsigned status;
    char *type;
    char *rbody;
    size_t rlen;
    s_kvs_t rheaders;
    ag_httpd_stream_t *stream; /* a reference, given to the response */
};

struct ag_httpd_stream {
    ag_httpd_stream_t *prev, *next; /* in d->streams */
    ag_httpd_t *d;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t room;  /* bytes were taken, or the client went */
    buf_t pending;
    size_t off; /* of pending, already sent */
    char *keepalive;
    bool closed;              /* the writer is done */
    bool gone;                /* the client or the server went */
    bool suspended;           /* the connection waits for bytes */
    struct MHD_Connection *c; /* while the response lives */
    int refs;                 /* writer + answer */
    int64_t sent_ms;          /* when bytes last went out */
};

struct ag_httpd {
    ag_httpd_opts_t o;
    struct MHD_Daemon *mhd;
    unsigned port;
    pthread_mutex_t lock; /* guards the fields below */
    pthread_cond_t work;  /* a request was queued, or stopping */
    pthread_cond_t idle;  /* running, queued or writers went down */
    s_conn_t *conns;
    unsigned nconns;
    uint64_t seq; /* connections accepted */
    ag_httpd_req_t *qhead, *qtail;
    unsigned queued, running, idle_workers, writers;
    pthread_t *tids;
    unsigned ntids;
    ag_httpd_stream_t *streams;
    size_t in_flight;
    bool stopping;
    bool sweep_stop;
    pthread_t sweeper;
    pthread_cond_t sweep_cond;
};

void
ag_httpd_limits_default(ag_httpd_limits_t *l)
{
    *l = (ag_httpd_limits_t){
        .header_ms = 10000,
        .request_ms = 120000,
        .idle_s = 60,
        .stale_ms = 2000,
        .peer_stale = 32,
        .max_connections = 1024,
        .max_body = 8u << 20,
        .body_in_flight = 16u << 20,
        .workers = 64,
        .queue_max = 128,
        .keepalive_ms = 15000,
        .stream_buffer = 1u << 20,
    };
}

/* ---- key/value lists --------------------------------------------------- */

static void
s_kvs_add(s_kvs_t *l, const char *name, const char *value)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = (s_kv_t){xstrdup(name), xstrdup(value ? value : "")};
}

static void
s_kvs_free(s_kvs_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
    *l = (s_kvs_t){0};
}

static enum MHD_Result
s_kvs_copy(void *cls, enum MHD_ValueKind kind, const char *key,
           const char *value)
{
    (void)kind;
    s_kvs_add(cls, key, value);
    return MHD_YES;
}

/* ---- connections (d->lock held) ---------------------------------------- */

static void
s_cut(s_conn_t *k, const char *why)
{
    log_info("http: closing a connection from %s: %s", k->peer, why);
    shutdown(k->fd, SHUT_RDWR);
    k->cut = true;
}

static s_conn_t *
s_conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

static void
s_set_phase(ag_httpd_t *d, struct MHD_Connection *c, s_phase_t phase)
{
    pthread_mutex_lock(&d->lock);
    s_conn_t *k = s_conn_of(c);
    if (k) {
        if (phase == P_HEADERS) {
            k->since_ms = clock_mono_ms();
            k->served = true;
        }
        k->phase = phase;
    }
    pthread_mutex_unlock(&d->lock);
}

static void
s_peer_text(const struct sockaddr *sa, char *out, size_t size)
{
    snprintf(out, size, "?");
    if (!sa)
        return;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET,
                  &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                  out, (socklen_t)size);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6,
                  &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                  out, (socklen_t)size);
}

static void
s_notify(void *cls, struct MHD_Connection *c, void **socket_context,
         enum MHD_ConnectionNotificationCode code)
{
    ag_httpd_t *d = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        s_conn_t *k = xcalloc(1, sizeof *k);
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        k->fd = fi ? fi->connect_fd : -1;
        s_peer_text(ai ? ai->client_addr : NULL, k->peer, sizeof k->peer);
        k->phase = P_HEADERS;
        k->since_ms = clock_mono_ms();
        unsigned cap = d->o.limits.max_connections;
        unsigned reserve = cap / 16 > 8 ? cap / 16 : 8;
        pthread_mutex_lock(&d->lock);
        if (d->nconns + reserve >= cap) { /* near the cap: make room */
            s_conn_t *oldest = NULL;
            for (s_conn_t *x = d->conns; x; x = x->next)
                if (!x->cut && x->phase != P_BUSY &&
                    (!oldest || x->since_ms < oldest->since_ms ||
                     (x->since_ms == oldest->since_ms && x->seq < oldest->seq)))
                    oldest = x;
            if (oldest)
                s_cut(oldest, "the oldest incomplete request, with the "
                              "server near its connection cap");
        }
        k->seq = ++d->seq;
        k->next = d->conns;
        if (d->conns)
            d->conns->prev = k;
        d->conns = k;
        d->nconns++;
        pthread_mutex_unlock(&d->lock);
        *socket_context = k;
        return;
    }
    s_conn_t *k = *socket_context;
    if (!k)
        return;
    pthread_mutex_lock(&d->lock);
    if (k->prev)
        k->prev->next = k->next;
    else
        d->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    d->nconns--;
    pthread_mutex_unlock(&d->lock);
    free(k);
    *socket_context = NULL;
}

/* For the per-peer count: incomplete and old connections. */
static int
s_by_peer_age(const void *a, const void *b)
{
    const s_conn_t *x = *(s_conn_t *const *)a, *y = *(s_conn_t *const *)b;
    int c = strcmp(x->peer, y->peer);
    if (c)
        return c;
    if (x->since_ms != y->since_ms)
        return x->since_ms < y->since_ms ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void
s_sweep_conns(ag_httpd_t *d, int64_t now)
{
    const ag_httpd_limits_t *l = &d->o.limits;
    s_conn_t **stale = xcalloc(d->nconns + 1, sizeof *stale);
    size_t n = 0;
    for (s_conn_t *k = d->conns; k; k = k->next) {
        if (k->cut || k->phase == P_BUSY)
            continue;
        int64_t age = now - k->since_ms;
        if (k->phase == P_HEADERS && age > l->header_ms)
            s_cut(k, "its request headers did not arrive in time");
        else if (age > l->request_ms)
            s_cut(k, "its request did not arrive in time");
        else if (!k->served && age > l->stale_ms)
            stale[n++] = k;
    }
    qsort(stale, n, sizeof *stale, s_by_peer_age);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(stale[j]->peer, stale[i]->peer) == 0)
            j++;
        for (size_t m = i; j - m > l->peer_stale; m++)
            s_cut(stale[m], "the oldest of too many incomplete requests "
                            "from one address");
        i = j;
    }
    free(stale);
}

/* ---- streams ------------------------------------------------------------ */

/* st->lock held. */
static void
s_stream_wake(ag_httpd_stream_t *st)
{
    if (!st->suspended || !st->c)
        return;
    st->suspended = false;
    MHD_resume_connection(st->c);
}

static void
s_stream_unref(ag_httpd_stream_t *st)
{
    pthread_mutex_lock(&st->lock);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->lock);
    if (!last)
        return;
    ag_httpd_t *d = st->d;
    pthread_mutex_lock(&d->lock);
    if (st->prev)
        st->prev->next = st->next;
    else
        d->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    pthread_mutex_unlock(&d->lock);
    buf_release(&st->pending);
    free(st->keepalive);
    pthread_cond_destroy(&st->room);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static void
s_sweep_streams(ag_httpd_t *d, int64_t now)
{
    for (ag_httpd_stream_t *st = d->streams; st; st = st->next) {
        pthread_mutex_lock(&st->lock);
        if (st->keepalive && st->suspended && !st->closed &&
            now - st->sent_ms >= d->o.limits.keepalive_ms) {
            buf_puts(&st->pending, st->keepalive);
            st->sent_ms = now;
            s_stream_wake(st);
        }
        pthread_mutex_unlock(&st->lock);
    }
}

/* MHD's content reader, on the event loop: never waits. */
static ssize_t
s_stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    ag_httpd_stream_t *st = cls;
    pthread_mutex_lock(&st->lock);
    ssize_t n;
    size_t have = st->pending.len - st->off;
    if (have == 0) {
        if (st->closed) {
            n = MHD_CONTENT_READER_END_OF_STREAM;
        } else {
            st->suspended = true;
            MHD_suspend_connection(st->c);
            n = 0;
        }
    } else {
        size_t k = have < max ? have : max;
        memcpy(out, st->pending.data + st->off, k);
        st->off += k;
        if (st->off == st->pending.len) {
            buf_reset(&st->pending);
            st->off = 0;
        }
        st->sent_ms = clock_mono_ms();
        pthread_cond_broadcast(&st->room);
        n = (ssize_t)k;
    }
    pthread_mutex_unlock(&st->lock);
    return n;
}

/* The response is gone: sent, or its connection closed. */
static void
s_stream_free(void *cls)
{
    ag_httpd_stream_t *st = cls;
    pthread_mutex_lock(&st->lock);
    st->gone = true;
    st->c = NULL;
    st->suspended = false;
    pthread_cond_broadcast(&st->room);
    pthread_mutex_unlock(&st->lock);
    s_stream_unref(st);
}

ag_httpd_stream_t *
ag_httpd_stream(ag_httpd_req_t *req, unsigned status, const char *type,
                const char *keepalive)
{
    ag_httpd_t *d = req->d;
    ag_httpd_stream_t *st = xcalloc(1, sizeof *st);
    st->d = d;
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->room, NULL);
    buf_init(&st->pending, 0);
    st->keepalive = keepalive ? xstrdup(keepalive) : NULL;
    st->refs = 2; /* the writer, and the answer */
    st->sent_ms = clock_mono_ms();
    pthread_mutex_lock(&d->lock);
    st->next = d->streams;
    if (d->streams)
        d->streams->prev = st;
    d->streams = st;
    d->writers++;
    st->gone = d->stopping;
    pthread_mutex_unlock(&d->lock);
    req->stream = st;
    ag_httpd_reply(req, status, type, NULL, 0);
    return st;
}

int
ag_httpd_stream_write(ag_httpd_stream_t *st, const void *data, size_t len)
{
    size_t cap = st->d->o.limits.stream_buffer;
    pthread_mutex_lock(&st->lock);
    while (!st->gone && st->pending.len - st->off >= cap)
        pthread_cond_wait(&st->room, &st->lock);
    int rc = -1;
    if (!st->gone && !st->closed) {
        buf_append(&st->pending, data, len);
        s_stream_wake(st);
        rc = 0;
    }
    pthread_mutex_unlock(&st->lock);
    return rc;
}

bool
ag_httpd_stream_gone(ag_httpd_stream_t *st)
{
    pthread_mutex_lock(&st->lock);
    bool gone = st->gone;
    pthread_mutex_unlock(&st->lock);
    return gone;
}

void
ag_httpd_stream_close(ag_httpd_stream_t **pst)
{
    ag_httpd_stream_t *st = *pst;
    if (!st)
        return;
    *pst = NULL;
    ag_httpd_t *d = st->d;
    pthread_mutex_lock(&st->lock);
    st->closed = true;
    s_stream_wake(st);
    pthread_mutex_unlock(&st->lock);
    s_stream_unref(st);
    pthread_mutex_lock(&d->lock);
    d->writers--;
    pthread_cond_broadcast(&d->idle);
    pthread_mutex_unlock(&d->lock);
}

/* ---- answers ------------------------------------------------------------- */

void
ag_httpd_add_header(ag_httpd_req_t *req, const char *name, const char *value)
{
    s_kvs_add(&req->rheaders, name, value);
}

void
ag_httpd_reply(ag_httpd_req_t *req, unsigned status, const char *type,
               const char *body, size_t len)
{
    if (req->answered) {
        log_warn("http: a second answer to %s %s ignored", req->method,
                 req->path);
        return;
    }
    req->answered = true;
    req->status = status;
    req->type = type ? xstrdup(type) : NULL;
    req->rbody = xmalloc(len + 1);
    if (len)
        memcpy(req->rbody, body, len);
    req->rbody[len] = '\0';
    req->rlen = len;
    if (req->state != S_WORKING)
        return; /* on the event loop: queued when the handler returns */
    /* Hand back: the connection's resumption is our last touch of req. */
    struct MHD_Connection *c = req->c;
    if (req->job)
        req->job->answered = true;
    req->job = NULL;
    req->state = S_BACK;
    MHD_resume_connection(c);
}

static void s_refuse(ag_httpd_req_t *req, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
s_refuse(ag_httpd_req_t *req, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    ag_httpd_t *d = req->d;
    log_info("%s: HTTP %u: %s", d->o.name, status, text);
    /* On a worker the answer hands req back: after it, only job says
     * whether it was answered. */
    s_job_t *job = req->state == S_WORKING ? req->job : NULL;
    if (d->o.refuse)
        d->o.refuse(d->o.arg, req, status, text);
    if (!(job ? job->answered : req->answered)) {
        char *line = xasprintf("%s\n", text);
        ag_httpd_reply(req, status, "text/plain; charset=utf-8", line,
                       strlen(line));
        free(line);
    }
    free(text);
}

/* Queue req's answer on its connection (the event loop). */
static enum MHD_Result
s_queue(ag_httpd_t *d, struct MHD_Connection *c, ag_httpd_req_t *req)
{
    struct MHD_Response *r;
    if (req->stream) {
        ag_httpd_stream_t *st = req->stream;
        req->stream = NULL;
        pthread_mutex_lock(&st->lock);
        st->c = c;
        pthread_mutex_unlock(&st->lock);
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                              s_stream_read, st, s_stream_free);
        if (!r) {
            s_stream_free(st);
            return MHD_NO;
        }
    } else {
        r = MHD_create_response_from_buffer(req->rlen, req->rbody,
                                            MHD_RESPMEM_MUST_COPY);
        if (!r)
            return MHD_NO;
    }
    if (req->type)
        MHD_add_response_header(r, "Content-Type", req->type);
    for (size_t i = 0; i < req->rheaders.n; i++)
        MHD_add_response_header(r, req->rheaders.v[i].name,
                                req->rheaders.v[i].value);
    s_set_phase(d, c, P_BUSY);
    enum MHD_Result ret = MHD_queue_response(c, req->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- the worker pool ------------------------------------------------------
 */

static void *
s_worker(void *arg)
{
    ag_httpd_t *d = arg;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        /* d->queued counts requests about to be pushed as well. */
        while (!d->qhead && !(d->stopping && d->queued == 0))
            pthread_cond_wait(&d->work, &d->lock);
        if (!d->qhead)
            break;
        ag_httpd_req_t *req = d->qhead;
        d->qhead = req->qnext;
        if (!d->qhead)
            d->qtail = NULL;
        d->queued--;
        d->idle_workers--;
        d->running++;
        bool stopping = d->stopping;
        pthread_mutex_unlock(&d->lock);

        s_job_t job = {0};
        req->job = &job;
        if (stopping)
            s_refuse(req, 503, "Service Unavailable: the server is stopping");
        else
            d->o.handle(d->o.arg, req);
        if (!job.answered) /* req is still ours */
            s_refuse(req, 500, "Internal Server Error: %s %s was not answered",
                     req->method, req->path);

        pthread_mutex_lock(&d->lock);
        d->running--;
        d->idle_workers++;
        pthread_cond_broadcast(&d->idle);
    }
    d->idle_workers--;
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* Give req to a worker: false (nothing done) when every worker and queue
 * place is taken or the server stops. */
static bool
s_enqueue(ag_httpd_t *d, struct MHD_Connection *c, ag_httpd_req_t *req)
{
    const ag_httpd_limits_t *l = &d->o.limits;
    pthread_mutex_lock(&d->lock);
    bool room =
        !d->stopping && d->running + d->queued < l->workers + l->queue_max;
    if (room) {
        /* Its place, counted now: no worker exits while it is taken. */
        d->queued++;
        if (d->idle_workers < d->queued && d->ntids < l->workers) {
            pthread_t tid;
            if (pthread_create(&tid, NULL, s_worker, d) == 0) {
                d->tids[d->ntids++] = tid;
                d->idle_workers++;
            }
        }
    }
    pthread_mutex_unlock(&d->lock);
    if (!room)
        return false;
    /* Suspended before any worker can see it: its resumption cannot come
     * first. */
    req->state = S_WORKING;
    MHD_suspend_connection(c);
    s_set_phase(d, c, P_BUSY);
    pthread_mutex_lock(&d->lock);
    req->qnext = NULL;
    if (d->qtail)
        d->qtail->qnext = req;
    else
        d->qhead = req;
    d->qtail = req;
    pthread_cond_signal(&d->work);
    pthread_mutex_unlock(&d->lock);
    return true;
}

/* ---- the access handler (the event loop: never waits) -------------------- */

static bool
s_reserve(ag_httpd_t *d, ag_httpd_req_t *req, size_t n)
{
    pthread_mutex_lock(&d->lock);
    bool ok = n <= d->o.limits.body_in_flight - d->in_flight;
    if (ok) {
        d->in_flight += n;
        req->reserved += n;
    }
    pthread_mutex_unlock(&d->lock);
    return ok;
}

static void
s_unreserve(ag_httpd_t *d, ag_httpd_req_t *req)
{
    pthread_mutex_lock(&d->lock);
    d->in_flight -= req->reserved;
    req->reserved = 0;
    pthread_mutex_unlock(&d->lock);
}

static void
s_drop_body(ag_httpd_t *d, ag_httpd_req_t *req)
{
    buf_release(&req->body);
    buf_init(&req->body, d->o.limits.max_body);
    s_unreserve(d, req);
}

static ag_httpd_req_t *
s_req_new(ag_httpd_t *d, struct MHD_Connection *c, const char *url,
          const char *method)
{
    ag_httpd_req_t *req = xcalloc(1, sizeof *req);
    req->d = d;
    req->c = c;
    req->method = xstrdup(method);
    req->path = xstrdup(url);
    buf_init(&req->body, d->o.limits.max_body);
    MHD_get_connection_values(c, MHD_HEADER_KIND, s_kvs_copy, &req->headers);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, s_kvs_copy, &req->args);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    s_peer_text(ai ? ai->client_addr : NULL, req->peer, sizeof req->peer);
    return req;
}

static enum MHD_Result
s_handler(void *cls, struct MHD_Connection *c, const char *url,
          const char *method, const char *version, const char *upload,
          size_t *upload_size, void **con_cls)
{
    (void)version;
    ag_httpd_t *d = cls;
    ag_httpd_req_t *req = *con_cls;
    if (!req) { /* the headers are in */
        req = s_req_new(d, c, url, method);
        *con_cls = req;
        s_set_phase(d, c, P_BODY);
        pthread_mutex_lock(&d->lock);
        bool stopping = d->stopping;
        pthread_mutex_unlock(&d->lock);
        if (stopping)
            s_refuse(req, 503, "Service Unavailable: the server is stopping");
        else if (d->o.check)
            d->o.check(d->o.arg, req);
        return req->answered ? s_queue(d, c, req) : MHD_YES;
    }
    if (*upload_size) {
        req->seen += *upload_size;
        if (!req->too_big && !req->busy && !s_reserve(d, req, *upload_size)) {
            req->busy = true;
            s_drop_body(d, req);
        }
        if (!req->too_big && !req->busy &&
            buf_append(&req->body, upload, *upload_size) < 0) {
            req->too_big = true;
            s_drop_body(d, req);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (req->state == S_BACK) /* the worker answered */
        return s_queue(d, c, req);
    if (req->state == S_WORKING) /* cannot be: it is suspended */
        return MHD_YES;
    if (req->too_big)
        s_refuse(req, 413,
                 "Content Too Large: a body of %zu bytes or more refused; "
                 "the limit is %zu bytes (%zu %s)",
                 req->seen, d->o.limits.max_body,
                 d->o.limits.max_body >= (1u << 20)
                     ? d->o.limits.max_body >> 20
                     : d->o.limits.max_body >> 10,
                 d->o.limits.max_body >= (1u << 20) ? "MiB" : "KiB");
    else if (req->busy)
        s_refuse(req, 503,
                 "Service Unavailable: other requests hold %zu MiB of bodies, "
                 "the most this server holds at once; retry when they are "
                 "answered",
                 d->o.limits.body_in_flight >> 20);
    else if (!s_enqueue(d, c, req))
        s_refuse(req, 503,
                 "Service Unavailable: %u requests are being handled or "
                 "waiting, the most this server takes at once; try again "
                 "shortly",
                 d->o.limits.workers + d->o.limits.queue_max);
    else
        return MHD_YES;
    return s_queue(d, c, req);
}

static void
s_completed(void *cls, struct MHD_Connection *c, void **con_cls,
            enum MHD_RequestTerminationCode why)
{
    (void)why;
    ag_httpd_t *d = cls;
    s_set_phase(d, c, P_HEADERS); /* the next request's deadline starts */
    ag_httpd_req_t *req = *con_cls;
    if (!req)
        return;
    *con_cls = NULL;
    if (req->stream) /* answered, never queued */
        s_stream_free(req->stream);
    s_unreserve(d, req);
    buf_release(&req->body);
    s_kvs_free(&req->headers);
    s_kvs_free(&req->args);
    s_kvs_free(&req->rheaders);
    free(req->method);
    free(req->path);
    free(req->type);
    free(req->rbody);
    free(req);
}

/* ---- the request's accessors ------------------------------------------- */

const char *
ag_httpd_method(const ag_httpd_req_t *req)
{
    return req->method;
}

const char *
ag_httpd_path(const ag_httpd_req_t *req)
{
    return req->path;
}

const char *
ag_httpd_header(const ag_httpd_req_t *req, const char *name)
{
    for (size_t i = 0; i < req->headers.n; i++)
        if (strcasecmp(req->headers.v[i].name, name) == 0)
            return req->headers.v[i].value;
    return NULL;
}

const char *
ag_httpd_query(const ag_httpd_req_t *req, const char *name)
{
    for (size_t i = 0; i < req->args.n; i++)
        if (strcmp(req->args.v[i].name, name) == 0)
            return req->args.v[i].value;
    return NULL;
}

const char *
ag_httpd_body(const ag_httpd_req_t *req, size_t *len)
{
    if (len)
        *len = req->body.len;
    return req->body.data ? req->body.data : "";
}

const char *
ag_httpd_peer(const ag_httpd_req_t *req)
{
    return req->peer;
}

/* ---- the daemon ------------------------------------------------------------
 */

static void *
s_sweeper(void *arg)
{
    ag_httpd_t *d = arg;
    pthread_mutex_lock(&d->lock);
    while (!d->sweep_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += SWEEP_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&d->sweep_cond, &d->lock, &ts);
        if (d->sweep_stop)
            break;
        int64_t now = clock_mono_ms();
        s_sweep_conns(d, now);
        s_sweep_streams(d, now);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static void
s_mhd_log(void *cls, const char *fmt, va_list ap)
{
    ag_httpd_t *d = cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    log_info("%s: http: %s", d->o.name, line);
}

/* How many connections the fd limit leaves room for. */
static unsigned
s_fd_room(unsigned want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return want;
    rlim_t room = rl.rlim_cur > 192 ? rl.rlim_cur - 128 : 64;
    return room < want ? (unsigned)room : want;
}

ag_httpd_t *
ag_httpd_start(const ag_httpd_opts_t *o, err_t *err)
{
    const ag_httpd_limits_t *l = &o->limits;
    if (!o->handle || !o->addr || l->header_ms <= 0 || l->request_ms <= 0 ||
        l->idle_s <= 0 || l->stale_ms <= 0 || l->max_connections < 16 ||
        l->max_body == 0 || l->body_in_flight < l->max_body ||
        l->workers == 0 || l->keepalive_ms <= 0 || l->stream_buffer == 0) {
        err_set(err, ERR_USAGE, "http: limits out of range");
        return NULL;
    }
    ag_httpd_t *d = xcalloc(1, sizeof *d);
    d->o = *o;
    if (!d->o.name)
        d->o.name = "http";
    d->o.limits.max_connections = s_fd_room(l->max_connections);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->idle, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->sweep_cond, &ca);
    pthread_condattr_destroy(&ca);
    d->tids = xcalloc(l->workers, sizeof *d->tids);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (o->addr->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    d->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, s_handler, d, MHD_OPTION_EXTERNAL_LOGGER,
        s_mhd_log, d, MHD_OPTION_SOCK_ADDR, o->addr,
        MHD_OPTION_CONNECTION_LIMIT, d->o.limits.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)l->idle_s,
        MHD_OPTION_NOTIFY_COMPLETED, s_completed, d,
        MHD_OPTION_NOTIFY_CONNECTION, s_notify, d, MHD_OPTION_END);
    if (!d->mhd) {
        err_set(err, ERR_IO, "cannot listen there: %s", strerror(errno));
        goto fail;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
    d->port = info ? info->port : 0;
    if (pthread_create(&d->sweeper, NULL, s_sweeper, d) != 0) {
        MHD_stop_daemon(d->mhd);
        err_set(err, ERR_IO, "http: cannot start a thread");
        goto fail;
    }
    return d;
fail:
    pthread_cond_destroy(&d->sweep_cond);
    pthread_cond_destroy(&d->idle);
    pthread_cond_destroy(&d->work);
    pthread_mutex_destroy(&d->lock);
    free(d->tids);
    free(d);
    return NULL;
}

unsigned
ag_httpd_port(const ag_httpd_t *d)
{
    return d->port;
}

void
ag_httpd_shutdown(ag_httpd_t *d)
{
    pthread_mutex_lock(&d->lock);
    d->stopping = true;
    pthread_cond_broadcast(&d->work);
    pthread_mutex_unlock(&d->lock);
}

void
ag_httpd_stop(ag_httpd_t **pd)
{
    ag_httpd_t *d = *pd;
    if (!d)
        return;
    *pd = NULL;
    pthread_mutex_lock(&d->lock);
    d->stopping = true;
    for (ag_httpd_stream_t *st = d->streams; st; st = st->next) {
        pthread_mutex_lock(&st->lock);
        st->gone = true;
        pthread_cond_broadcast(&st->room);
        pthread_mutex_unlock(&st->lock);
    }
    pthread_cond_broadcast(&d->work);
    /* Every request handed back and every stream closed: no connection
     * stays suspended, as MHD_stop_daemon requires. */
    while (d->running || d->queued || d->writers)
        pthread_cond_wait(&d->idle, &d->lock);
    pthread_cond_broadcast(&d->work); /* idle workers exit */
    d->sweep_stop = true;
    pthread_cond_signal(&d->sweep_cond);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->sweeper, NULL);
    MHD_stop_daemon(d->mhd);
    for (unsigned i = 0; i < d->ntids; i++)
        pthread_join(d->tids[i], NULL);
    pthread_cond_destroy(&d->sweep_cond);
    pthread_cond_destroy(&d->idle);
    pthread_cond_destroy(&d->work);
    pthread_mutex_destroy(&d->lock);
    free(d->tids);
    free(d);
}
