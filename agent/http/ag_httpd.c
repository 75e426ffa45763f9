#include "agent/http/ag_httpd_impl.h"

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

/* ---- key/value lists ---------------------------------------------------- */

static enum MHD_Result
s_kvs_copy(void *cls, enum MHD_ValueKind kind, const char *key,
           const char *value)
{
    (void)kind;
    ag_httpd_kvs_add(cls, key, value);
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
    ag_httpd_job_t *job = req->state == S_WORKING ? req->job : NULL;
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
                                              ag_httpd_stream_reader, st,
                                              ag_httpd_stream_release);
        if (!r) {
            ag_httpd_stream_release(st);
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

        ag_httpd_job_t job = {0};
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
        ag_httpd_stream_release(req->stream);
    s_unreserve(d, req);
    buf_release(&req->body);
    ag_httpd_kvs_free(&req->headers);
    ag_httpd_kvs_free(&req->args);
    ag_httpd_kvs_free(&req->rheaders);
    free(req->method);
    free(req->path);
    free(req->type);
    free(req->rbody);
    free(req);
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
        clock_mono_after(&ts, SWEEP_MS);
        pthread_cond_timedwait(&d->sweep_cond, &d->lock, &ts);
        if (d->sweep_stop)
            break;
        int64_t now = clock_mono_ms();
        s_sweep_conns(d, now);
        ag_httpd_streams_sweep(d, now);
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

static void
s_free(ag_httpd_t *d)
{
    pthread_cond_destroy(&d->sweep_cond);
    pthread_cond_destroy(&d->idle);
    pthread_cond_destroy(&d->work);
    pthread_mutex_destroy(&d->lock);
    free(d->tids);
    free(d);
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
        err_errno(err, ERR_IO, "cannot listen there");
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
    s_free(d);
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
    s_free(d);
}
