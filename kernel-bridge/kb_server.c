#include "kb_server.h"

#include "kernel-bridge/transport/kb_zmq.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define DEFAULT_MAX_MSG ((int64_t)64 << 20)
#define TICK_MS 100
#define STDIN_CONNECT_MS 5000 /* wait for a frontend's stdin to connect */

typedef struct handler {
    char *msg_type;   /* owned */
    kb_handler_fn fn; /* never NULL while in the table */
    void *arg;        /* passed to fn */
} handler_t;

typedef struct table {
    handler_t *v; /* owned array of n entries */
    size_t n;
} table_t;

struct kb_server {
    void *zctx;                 /* owned zmq context */
    void *sock[KB_NCHANNELS];   /* owned; hb and control belong to their
                                   threads once those run (then NULL here) */
    void *control;              /* the control socket, owned by ctl_thread */
    pthread_t hb_thread;        /* echoes heartbeats; valid when hb_running */
    bool hb_running;            /* hb_thread started and not yet joined */
    pthread_t ctl_thread;       /* serves control; valid when ctl_running */
    bool ctl_running;           /* ctl_thread started and not yet joined */
    pthread_mutex_t iopub_lock; /* serialises sends on iopub */
    pthread_mutex_t stats_lock; /* guards stats */
    kb_key_t *key;              /* owned HMAC key, read-only after new */
    char session[37];           /* header.session of what we send */
    char *username;             /* owned header.username */
    kb_wire_stats_t stats;      /* accepted / dropped, all channels */
    kb_frames_limits_t limits;  /* frames and bytes one message may have */
    kb_wire_stats_t snapshot;   /* what kb_server_stats last returned */
    table_t shell;              /* shell handlers (shell thread) */
    table_t ctl;                /* control handlers (control thread) */
    atomic_uint events;         /* latched KB_SERVER_* bits */
    atomic_int cancel;          /* 1 while INTERRUPT or SHUTDOWN latched */
    kb_msg_t *shutdown;         /* owned copy of the shutdown_request whose
                                   reply destroy broadcasts; iopub_lock */
    kb_msg_t **held;            /* owned shell requests held by abort_queued */
    size_t nheld;               /* entries in held */
    size_t naborting;           /* the first naborting entries of held arrived
                                   before a failed reply: executions are aborted */
};

static void s_serve_held(kb_server_t *s);

static int s_on_interrupt(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                          void *arg);
static int s_on_shutdown(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                         void *arg);
static void s_dispatch(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req);
static kb_msg_t *s_recv(kb_server_t *s, void *sock, kb_channel_t ch);

/* The heartbeat: every message in goes straight back to its sender. The
 * proxy returns when the context is shut down (ETERM). */
static void *
s_hb_main(void *arg)
{
    void *hb = arg;
    zmq_proxy(hb, hb, NULL);
    zmq_close(hb);
    return NULL;
}

/* The control thread: serve control requests until the context is shut
 * down. */
static void *
s_ctl_main(void *arg)
{
    kb_server_t *s = arg;
    for (;;) {
        zmq_pollitem_t it = {s->control, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            break; /* ETERM: the server is being destroyed */
        }
        kb_msg_t *m;
        int events = 0;
        size_t len = sizeof events;
        do {
            m = s_recv(s, s->control, KB_CONTROL);
            if (m)
                s_dispatch(s, KB_CONTROL, m);
            kb_msg_destroy(&m);
            events = 0;
        } while (zmq_getsockopt(s->control, ZMQ_EVENTS, &events, &len) == 0 &&
                 (events & ZMQ_POLLIN));
    }
    zmq_close(s->control);
    return NULL;
}

/* Start a helper thread with every signal blocked, so signals reach the
 * thread that serves shell. */
static int
s_start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static void *
s_bind(kb_server_t *s, const kb_conn_t *conn, kb_channel_t ch, int type,
       int64_t max_msg, err_t *err)
{
    char endpoint[256] = "";
    void *sock = zmq_socket(s->zctx, type);
    if (!sock) {
        err_set(err, ERR_KERNEL, "cannot create the %s socket: %s",
                kb_channel_name(ch), zmq_strerror(errno));
        return NULL;
    }
    int linger = type == ZMQ_PUB ? 1000 : 0; /* let the last idle out */
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg);
    if (type == ZMQ_ROUTER) { /* a reconnecting client takes its id back */
        int on = 1;
        zmq_setsockopt(sock, ZMQ_ROUTER_HANDOVER, &on, sizeof on);
        /* An input_request to a frontend whose stdin is not connected (yet)
         * must fail loudly, not vanish (kb_server_input retries). */
        if (ch == KB_STDIN)
            zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &on, sizeof on);
    }
    if (kb_conn_endpoint(conn, ch, endpoint, sizeof endpoint) ||
        zmq_bind(sock, endpoint) != 0) {
        err_set(err, ERR_KERNEL, "cannot bind the %s channel to %s: %s",
                kb_channel_name(ch), endpoint, zmq_strerror(errno));
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

kb_server_t *
kb_server_new(const kb_conn_t *conn, const kb_server_opts_t *opts, err_t *err)
{
    static const int types[KB_NCHANNELS] = {[KB_SHELL] = ZMQ_ROUTER,
                                            [KB_IOPUB] = ZMQ_PUB,
                                            [KB_STDIN] = ZMQ_ROUTER,
                                            [KB_CONTROL] = ZMQ_ROUTER,
                                            [KB_HB] = ZMQ_ROUTER};
    kb_server_opts_t defaults = {0};
    if (!opts)
        opts = &defaults;
    if (conn->key[0] == '\0' && !opts->allow_unsigned) {
        err_set(err, ERR_USAGE,
                "the connection file has an empty key (messages would be "
                "unsigned); refusing to serve it");
        return NULL;
    }
    kb_server_t *s = xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->iopub_lock, NULL);
    pthread_mutex_init(&s->stats_lock, NULL);
    atomic_init(&s->events, 0);
    atomic_init(&s->cancel, 0);
    s->zctx = zmq_ctx_new();
    s->key = kb_key_new(conn->key, strlen(conn->key));
    kb_msg_new_uuid(s->session);
    s->username = xstrdup(opts->username ? opts->username : "kernel");
    int64_t max_msg =
        opts->max_msg_bytes > 0 ? opts->max_msg_bytes : DEFAULT_MAX_MSG;
    s->limits.max_bytes = (size_t)max_msg;
    /* A frontend's widget state can be dense JSON: the parse may cost its
     * length plus 64 MiB (common/jsonlim), as a client's may under the
     * default output budget. */
    s->limits.json_allowance = (size_t)64 << 20;
    if (!s->zctx || !s->key) {
        err_set(err, ERR_KERNEL, "cannot initialise zmq or libsodium");
        goto fail;
    }
    for (int ch = 0; ch < KB_NCHANNELS; ch++) {
        s->sock[ch] =
            s_bind(s, conn, (kb_channel_t)ch, types[ch], max_msg, err);
        if (!s->sock[ch])
            goto fail;
    }
    if (s_start_thread(&s->hb_thread, s_hb_main, s->sock[KB_HB]) != 0) {
        err_set(err, ERR_KERNEL, "cannot start the heartbeat thread");
        goto fail;
    }
    s->hb_running = true;
    s->sock[KB_HB] = NULL; /* the thread owns it now */
    kb_server_on_control(s, "interrupt_request", s_on_interrupt, NULL);
    kb_server_on_control(s, "shutdown_request", s_on_shutdown, NULL);
    return s;
fail:
    kb_server_destroy(&s);
    return NULL;
}

static void
s_table_release(table_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].msg_type);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

void
kb_server_destroy(kb_server_t **ps)
{
    if (!ps || !*ps)
        return;
    kb_server_t *s = *ps;
    /* Broadcast the shutdown, as ipykernel does (sockets refuse to send
     * once the context is shut down, so first). */
    pthread_mutex_lock(&s->iopub_lock);
    kb_msg_t *req = s->shutdown;
    s->shutdown = NULL;
    pthread_mutex_unlock(&s->iopub_lock);
    if (req && s->sock[KB_IOPUB]) {
        bool restart =
            json_is_true(json_object_get(kb_msg_content(req), "restart"));
        kb_server_publish(
            s, req, "shutdown_reply",
            json_pack("{s:s, s:b}", "status", "ok", "restart", restart), NULL);
    }
    kb_msg_destroy(&req);
    if (s->zctx)
        zmq_ctx_shutdown(s->zctx); /* wakes the heartbeat and control */
    if (s->hb_running)
        pthread_join(s->hb_thread, NULL);
    if (s->ctl_running)
        pthread_join(s->ctl_thread, NULL);
    kb_msg_destroy(&s->shutdown); /* a late one, never broadcast */
    for (int ch = 0; ch < KB_NCHANNELS; ch++)
        if (s->sock[ch])
            zmq_close(s->sock[ch]);
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    kb_key_destroy(&s->key);
    for (size_t i = 0; i < s->nheld; i++)
        kb_msg_destroy(&s->held[i]);
    free(s->held);
    s_table_release(&s->shell);
    s_table_release(&s->ctl);
    pthread_mutex_destroy(&s->iopub_lock);
    pthread_mutex_destroy(&s->stats_lock);
    free(s->username);
    free(s);
    *ps = NULL;
}

static void
s_table_set(table_t *t, const char *msg_type, kb_handler_fn fn, void *arg)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->v[i].msg_type, msg_type) != 0)
            continue;
        if (fn) {
            t->v[i].fn = fn;
            t->v[i].arg = arg;
        } else {
            free(t->v[i].msg_type);
            t->v[i] = t->v[--t->n];
        }
        return;
    }
    if (!fn)
        return;
    t->v = xrealloc(t->v, (t->n + 1) * sizeof *t->v);
    t->v[t->n++] =
        (handler_t){.msg_type = xstrdup(msg_type), .fn = fn, .arg = arg};
}

void
kb_server_on(kb_server_t *s, const char *msg_type, kb_handler_fn fn, void *arg)
{
    s_table_set(&s->shell, msg_type, fn, arg);
}

void
kb_server_on_control(kb_server_t *s, const char *msg_type, kb_handler_fn fn,
                     void *arg)
{
    s_table_set(&s->ctl, msg_type, fn, arg);
}

static const handler_t *
s_find(const table_t *t, const char *msg_type)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].msg_type, msg_type) == 0)
            return &t->v[i];
    return NULL;
}

const kb_wire_stats_t *
kb_server_stats(const kb_server_t *s)
{
    kb_server_t *w = (kb_server_t *)s; /* the snapshot is a cache */
    pthread_mutex_lock(&w->stats_lock);
    w->snapshot = w->stats;
    pthread_mutex_unlock(&w->stats_lock);
    return &w->snapshot;
}

unsigned
kb_server_events(const kb_server_t *s)
{
    return atomic_load(&s->events);
}

const atomic_int *
kb_server_cancel_flag(const kb_server_t *s)
{
    return &s->cancel;
}

void
kb_server_raise(kb_server_t *s, unsigned events)
{
    atomic_fetch_or(&s->events, events);
    if (events & (KB_SERVER_INTERRUPT | KB_SERVER_SHUTDOWN))
        atomic_store(&s->cancel, 1);
}

void
kb_server_stop(kb_server_t *s)
{
    kb_server_raise(s, KB_SERVER_SHUTDOWN);
}

void
kb_server_clear_interrupt(kb_server_t *s)
{
    unsigned left = atomic_fetch_and(&s->events, ~KB_SERVER_INTERRUPT) &
                    ~KB_SERVER_INTERRUPT;
    if (!(left & KB_SERVER_SHUTDOWN))
        atomic_store(&s->cancel, 0);
}

/* ---- sending ---- */

static int
s_send(kb_server_t *s, void *sock, kb_channel_t ch, const kb_msg_t *msg,
       err_t *err)
{
    /* errno is kept: callers look at EHOSTUNREACH */
    return kb_zmq_send(sock, msg, s->key, kb_channel_name(ch), err);
}

static void *
s_sock(kb_server_t *s, kb_channel_t ch)
{
    return ch == KB_CONTROL ? s->control : s->sock[ch];
}

int
kb_server_reply(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                const char *reply_type, json_t *content, err_t *err)
{
    kb_msg_t *reply =
        kb_msg_new_reply(req, reply_type, s->session, s->username);
    kb_msg_set_content(reply, content ? content : json_object());
    /* ipykernel mirrors the status into the metadata; some frontends read
     * it from there. */
    json_t *status = json_object_get(kb_msg_content(reply), "status");
    if (json_is_string(status))
        json_object_set(kb_msg_metadata(reply), "status", status);
    int rc = s_send(s, s_sock(s, ch), ch, reply, err);
    kb_msg_destroy(&reply);
    return rc;
}

int
kb_server_publish(kb_server_t *s, const kb_msg_t *parent, const char *msg_type,
                  json_t *content, err_t *err)
{
    kb_msg_t *msg = kb_msg_new(msg_type, s->session, s->username);
    kb_msg_set_content(msg, content ? content : json_object());
    if (parent)
        kb_msg_set_parent(msg, parent);
    char topic[128];
    int n = snprintf(topic, sizeof topic, "kernel.%s.%s", s->session, msg_type);
    kb_msg_add_identity(msg, topic,
                        n < (int)sizeof topic ? (size_t)n : sizeof topic - 1);
    pthread_mutex_lock(&s->iopub_lock);
    int rc = s_send(s, s->sock[KB_IOPUB], KB_IOPUB, msg, err);
    pthread_mutex_unlock(&s->iopub_lock);
    kb_msg_destroy(&msg);
    return rc;
}

int
kb_server_status(kb_server_t *s, const kb_msg_t *parent, const char *state)
{
    return kb_server_publish(s, parent, "status",
                             json_pack("{s:s}", "execution_state", state),
                             NULL);
}

int
kb_server_stream(kb_server_t *s, const kb_msg_t *parent, const char *name,
                 const char *text)
{
    return kb_server_publish(
        s, parent, "stream",
        json_pack("{s:s, s:s}", "name", name, "text", text), NULL);
}

/* ---- receiving ---- */

/* Receive one multipart message without blocking; NULL if none was waiting
 * or it was dropped (signature, framing, size), counted in stats. */
static kb_msg_t *
s_recv(kb_server_t *s, void *sock, kb_channel_t ch)
{
    kb_wire_stats_t delta = {0};
    err_t err;
    kb_msg_t *msg = kb_zmq_recv(sock, s->key, &s->limits, &delta, &err);
    if (!msg && err.code)
        log_warn("dropped a %s message: %s", kb_channel_name(ch), err.text);
    if (delta.accepted || delta.bad_signature || delta.malformed) {
        pthread_mutex_lock(&s->stats_lock);
        s->stats.accepted += delta.accepted;
        s->stats.bad_signature += delta.bad_signature;
        s->stats.malformed += delta.malformed;
        pthread_mutex_unlock(&s->stats_lock);
    }
    return msg;
}

/* Is another message waiting on `sock` right now? */
static bool
s_pending(void *sock)
{
    int events = 0;
    size_t len = sizeof events;
    if (zmq_getsockopt(sock, ZMQ_EVENTS, &events, &len) != 0)
        return false;
    return (events & ZMQ_POLLIN) != 0;
}

static void
s_dispatch(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req)
{
    const char *type = kb_msg_type(req);
    kb_server_status(s, req, "busy");
    const handler_t *h = s_find(ch == KB_CONTROL ? &s->ctl : &s->shell, type);
    if (!h)
        log_warn("%s: no handler for '%s'; ignored", kb_channel_name(ch), type);
    else if (h->fn(s, ch, req, h->arg) != 0)
        log_warn("%s: the %s handler failed", kb_channel_name(ch), type);
    kb_server_status(s, req, "idle");
}

unsigned
kb_server_poll_control(kb_server_t *s, int timeout_ms)
{
    const unsigned stop = KB_SERVER_INTERRUPT | KB_SERVER_SHUTDOWN;
    int64_t deadline = clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        unsigned ev = atomic_load(&s->events);
        int64_t left = deadline - clock_mono_ms();
        if ((ev & stop) || left <= 0)
            return ev;
        struct timespec ts = {0, (left < 10 ? left : 10) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int
s_start_control(kb_server_t *s)
{
    if (s->ctl_running)
        return 0;
    s->control = s->sock[KB_CONTROL];
    s->sock[KB_CONTROL] = NULL;
    if (s_start_thread(&s->ctl_thread, s_ctl_main, s) != 0) {
        s->sock[KB_CONTROL] = s->control;
        return -1;
    }
    s->ctl_running = true;
    return 0;
}

unsigned
kb_server_serve_once(kb_server_t *s, int timeout_ms)
{
    if (s_start_control(s))
        log_error("cannot start the control thread; interrupts will wait");
    if (!(atomic_load(&s->events) & KB_SERVER_SHUTDOWN)) {
        zmq_pollitem_t it = {s->sock[KB_SHELL], 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, timeout_ms);
    }
    s_serve_held(s);
    while (!(atomic_load(&s->events) & KB_SERVER_SHUTDOWN) &&
           s_pending(s->sock[KB_SHELL])) {
        kb_msg_t *m = s_recv(s, s->sock[KB_SHELL], KB_SHELL);
        if (m) {
            kb_server_clear_interrupt(s);
            s_dispatch(s, KB_SHELL, m);
        }
        kb_msg_destroy(&m);
        s_serve_held(s);
    }
    return atomic_load(&s->events);
}

int
kb_server_run(kb_server_t *s)
{
    while (!(kb_server_serve_once(s, TICK_MS) & KB_SERVER_SHUTDOWN))
        ;
    return 0;
}

int
kb_server_abort_queued(kb_server_t *s)
{
    int n = 0;
    while (s_pending(s->sock[KB_SHELL])) {
        kb_msg_t *m = s_recv(s, s->sock[KB_SHELL], KB_SHELL);
        if (!m)
            continue;
        s->held = xrealloc(s->held, (s->nheld + 1) * sizeof *s->held);
        s->held[s->nheld++] = m;
        if (strcmp(kb_msg_type(m), "execute_request") == 0)
            n++;
    }
    s->naborting = s->nheld;
    return n;
}

/* Serve the requests held by kb_server_abort_queued, in arrival order. */
static void
s_serve_held(kb_server_t *s)
{
    while (s->nheld && !(atomic_load(&s->events) & KB_SERVER_SHUTDOWN)) {
        kb_msg_t *m = s->held[0];
        bool abort = s->naborting > 0;
        memmove(s->held, s->held + 1, --s->nheld * sizeof *s->held);
        if (s->naborting)
            s->naborting--;
        if (abort && strcmp(kb_msg_type(m), "execute_request") == 0) {
            kb_server_status(s, m, "busy");
            kb_server_reply(s, KB_SHELL, m, "execute_reply",
                            json_pack("{s:s}", "status", "aborted"), NULL);
            kb_server_status(s, m, "idle");
        } else { /* only executions are aborted (ipykernel 6) */
            kb_server_clear_interrupt(s);
            s_dispatch(s, KB_SHELL, m);
        }
        kb_msg_destroy(&m);
    }
}

/* ---- built-in control handlers (control thread) ---- */

static int
s_on_interrupt(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    (void)arg;
    kb_server_raise(s, KB_SERVER_INTERRUPT);
    return kb_server_reply(s, ch, req, "interrupt_reply",
                           json_pack("{s:s}", "status", "ok"), NULL);
}

static int
s_on_shutdown(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    (void)arg;
    bool restart =
        json_is_true(json_object_get(kb_msg_content(req), "restart"));
    json_t *content =
        json_pack("{s:s, s:b}", "status", "ok", "restart", restart);
    /* Keep a copy of the request: destroy broadcasts the reply to it. */
    kb_msg_t *copy =
        kb_msg_from_parts(json_deep_copy(kb_msg_header(req)),
                          json_deep_copy(kb_msg_parent_header(req)),
                          json_deep_copy(kb_msg_metadata(req)),
                          json_deep_copy(kb_msg_content(req)));
    pthread_mutex_lock(&s->iopub_lock);
    kb_msg_destroy(&s->shutdown);
    s->shutdown = copy;
    pthread_mutex_unlock(&s->iopub_lock);
    int rc = kb_server_reply(s, ch, req, "shutdown_reply", content, NULL);
    kb_server_raise(s, KB_SERVER_SHUTDOWN);
    return rc;
}

/* ---- stdin (shell thread) ---- */

char *
kb_server_input(kb_server_t *s, const kb_msg_t *parent, const char *prompt,
                bool password, int timeout_ms, err_t *err)
{
    void *sock = s->sock[KB_STDIN];
    kb_msg_t *m = NULL;
    /* Replies to an earlier, abandoned request must not answer this one. */
    while (s_pending(sock)) {
        m = s_recv(s, sock, KB_STDIN);
        kb_msg_destroy(&m);
    }
    kb_msg_t *req =
        kb_msg_new_reply(parent, "input_request", s->session, s->username);
    kb_msg_set_content(
        req, json_pack("{s:s, s:b}", "prompt", prompt, "password", password));
    char *value = NULL;
    /* The frontend's stdin may still be connecting: retry briefly. */
    int64_t connect_end = clock_mono_ms() + STDIN_CONNECT_MS;
    while (s_send(s, sock, KB_STDIN, req, err)) {
        if (errno != EHOSTUNREACH || clock_mono_ms() > connect_end ||
            (atomic_load(&s->events) &
             (KB_SERVER_INTERRUPT | KB_SERVER_SHUTDOWN))) {
            err_set(err, ERR_USAGE,
                    "input() needs the frontend's stdin channel, and it is "
                    "not connected");
            goto out;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int64_t deadline = timeout_ms > 0 ? clock_mono_ms() + timeout_ms : 0;
    for (;;) {
        if (atomic_load(&s->events) &
            (KB_SERVER_INTERRUPT | KB_SERVER_SHUTDOWN)) {
            err_set(err, ERR_INTERRUPTED, "input was interrupted");
            goto out;
        }
        int wait = TICK_MS;
        if (deadline) {
            int64_t left = deadline - clock_mono_ms();
            if (left <= 0) {
                err_set(err, ERR_TIMEOUT, "no input_reply within %d ms",
                        timeout_ms);
                goto out;
            }
            if (left < wait)
                wait = (int)left;
        }
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, wait);
        while (s_pending(sock)) {
            m = s_recv(s, sock, KB_STDIN);
            /* jupyter_client sends input_reply without a parent header,
             * so the first reply after our request is the answer. */
            json_t *v = m ? json_object_get(kb_msg_content(m), "value") : NULL;
            if (m && !value && strcmp(kb_msg_type(m), "input_reply") == 0)
                value = xstrdup(json_is_string(v) ? json_string_value(v) : "");
            kb_msg_destroy(&m);
        }
        if (value)
            goto out;
    }
out:
    kb_msg_destroy(&req);
    return value;
}
