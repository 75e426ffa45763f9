#include "agent/http/ag_httpd_impl.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

void
ag_httpd_streams_sweep(ag_httpd_t *d, int64_t now)
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
ssize_t
ag_httpd_stream_reader(void *cls, uint64_t pos, char *out, size_t max)
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
void
ag_httpd_stream_release(void *cls)
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
