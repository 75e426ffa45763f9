#include "agent/e2b/e2b_http.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

const char *
e2b_req_header(const e2b_req_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *
e2b_req_arg(const e2b_req_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

void
e2b_reply(e2b_req_t *r, unsigned status, const char *ctype, const void *body,
          size_t len)
{
    if (r->answered)
        return;
    r->answered = true;
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (!resp) {
        r->ret = MHD_NO;
        return;
    }
    if (ctype)
        MHD_add_response_header(resp, "Content-Type", ctype);
    if (r->extra_name)
        MHD_add_response_header(resp, r->extra_name, r->extra_value);
    r->ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
}

void
e2b_reply_json(e2b_req_t *r, unsigned status, json_t *j)
{
    json_t *obj = j ? j : json_object();
    char *text = json_dumps(obj, JSON_COMPACT);
    e2b_reply(r, status, "application/json", text, text ? strlen(text) : 0);
    free(text);
    json_decref(obj);
}

void
e2b_reply_error(e2b_req_t *r, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    log_info("e2b: %s %s: %u %s", r->method, r->path, status, text);
    e2b_reply_json(
        r, status,
        json_pack("{s:i, s:s}", "code", (int)status, "message", text));
    free(text);
}

void
e2b_reply_header(e2b_req_t *r, const char *name, const char *value)
{
    r->extra_name = name;
    r->extra_value = value;
}

void
e2b_reply_empty(e2b_req_t *r, unsigned status)
{
    e2b_reply(r, status, NULL, NULL, 0);
}

/* ---- streams ----------------------------------------------------------- */

struct e2b_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* pending changed, or done/gone */
    buf_t pending;       /* bytes not yet taken by the connection */
    bool done;           /* the producer closed: end once pending is sent */
    bool gone;           /* the client hung up */
    int refs;            /* producer + connection */
    int fd;              /* the connection's socket (borrowed), or -1 */
    char *keepalive;     /* owned, or NULL */
    int keepalive_s;
    time_t last_sent; /* when bytes last went to the connection */
};

static void
s_stream_unref(e2b_stream_t *st)
{
    pthread_mutex_lock(&st->lock);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->lock);
    if (!last)
        return;
    buf_release(&st->pending);
    free(st->keepalive);
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* Has the peer closed its side? (A request pipelined behind this one is
 * data, not a hang-up.) */
static bool
s_peer_closed(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP))
        return true;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static ssize_t
s_stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    e2b_stream_t *st = cls;
    pthread_mutex_lock(&st->lock);
    for (;;) {
        if (st->pending.len || st->done || st->gone)
            break;
        if (s_peer_closed(st->fd)) {
            st->gone = true;
            pthread_cond_broadcast(&st->cond);
            break;
        }
        if (st->keepalive &&
            time(NULL) - st->last_sent >= (time_t)st->keepalive_s) {
            buf_puts(&st->pending, st->keepalive);
            break;
        }
        struct timespec ts;
        clock_realtime_after(&ts, 250); /* look at the socket 4 x a second */
        pthread_cond_timedwait(&st->cond, &st->lock, &ts);
    }
    ssize_t n;
    if (st->gone) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    } else if (st->pending.len == 0) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        size_t k = st->pending.len < max ? st->pending.len : max;
        memcpy(out, st->pending.data, k);
        memmove(st->pending.data, st->pending.data + k, st->pending.len - k);
        st->pending.len -= k;
        st->pending.data[st->pending.len] = '\0';
        st->last_sent = time(NULL);
        pthread_cond_broadcast(&st->cond); /* room for a waiting writer */
        n = (ssize_t)k;
    }
    pthread_mutex_unlock(&st->lock);
    return n;
}

static void
s_stream_free(void *cls)
{
    e2b_stream_t *st = cls;
    pthread_mutex_lock(&st->lock);
    if (!st->done)
        st->gone = true; /* the connection went before the end */
    st->fd = -1;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->lock);
    s_stream_unref(st);
}

e2b_stream_t *
e2b_stream_open(e2b_req_t *r, unsigned status, const char *ctype,
                const char *keepalive, int keepalive_s)
{
    if (r->answered)
        return NULL;
    e2b_stream_t *st = xcalloc(1, sizeof *st);
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->cond, NULL);
    buf_init(&st->pending, 0);
    st->refs = 2;
    st->keepalive = keepalive ? xstrdup(keepalive) : NULL;
    st->keepalive_s = keepalive_s > 0 ? keepalive_s : 5;
    st->last_sent = time(NULL);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    st->fd = ci ? ci->connect_fd : -1;
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16384, s_stream_read, st, s_stream_free);
    if (!resp) {
        st->refs = 1;
        s_stream_unref(st);
        e2b_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR,
                        "out of memory starting a response stream");
        return NULL;
    }
    if (ctype)
        MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    r->answered = true;
    r->ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp); /* the connection keeps its reference */
    if (r->ret != MHD_YES) {
        /* s_stream_free ran (or runs when MHD drops the response): the
         * producer still holds its reference and sees "gone". */
        pthread_mutex_lock(&st->lock);
        st->gone = true;
        pthread_mutex_unlock(&st->lock);
    }
    return st;
}

void
e2b_stream_write(e2b_stream_t *st, const void *data, size_t len)
{
    pthread_mutex_lock(&st->lock);
    int waited = 0;
    while (!st->gone && st->pending.len > E2B_STREAM_MAX_PENDING) {
        if (waited++ >= 300) { /* 30 s: a client that does not read */
            st->gone = true;
            break;
        }
        struct timespec ts;
        clock_realtime_after(&ts, 100);
        pthread_cond_timedwait(&st->cond, &st->lock, &ts);
    }
    if (!st->gone)
        buf_append(&st->pending, data, len);
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->lock);
}

bool
e2b_stream_gone(e2b_stream_t *st)
{
    pthread_mutex_lock(&st->lock);
    bool g = st->gone;
    pthread_mutex_unlock(&st->lock);
    return g;
}

void
e2b_stream_close(e2b_stream_t **p)
{
    if (!p || !*p)
        return;
    e2b_stream_t *st = *p;
    *p = NULL;
    pthread_mutex_lock(&st->lock);
    st->done = true;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->lock);
    s_stream_unref(st);
}
