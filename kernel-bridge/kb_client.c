#include "kb_client.h"

#include "kernel-bridge/transport/kb_transport.h"
#include "kernel-bridge/wire/kb_frames.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_MSG ((int64_t)256 << 20)
#define TICK_MS 100
#define KB_HELD_MAX 16
/* One drain round reads at most DRAIN_MAX messages (dropped ones included)
 * or for DRAIN_MS from one channel, then the waiting loop looks at its
 * deadline, the kernel's death and should_stop again: a kernel that sends
 * as fast as we read cannot keep us from returning. */
#define DRAIN_MAX 512
#define DRAIN_MS 50
/* Once an execution's output cap is reached only its status matters; a
 * real status message is a few hundred bytes. */
#define STATUS_MAX_BYTES ((size_t)64 << 10)
/* While an execution runs, an iopub message of more than its output
 * budget plus this (header, parent, metadata, signature) cannot be stored
 * whole: our iopub reader drops it as its frame headers arrive, and the
 * execution is marked truncated. */
#define IOPUB_SLACK_BYTES ((size_t)256 << 10)
/* What one JSON part may cost to parse beyond its own length: the output
 * budget, within these bounds (common/jsonlim.h). */
#define JSON_ALLOWANCE_MIN ((size_t)4 << 20)
#define JSON_ALLOWANCE_MAX ((size_t)64 << 20)
/* Batching iopub reads: when STREAK_WAKES wake-ups in a row each found
 * messages no more than STREAK_GAP_US apart (counted from the end of the
 * last pause), the kernel is streaming outputs, so pause before polling
 * again and read the next batch in one wake-up instead of one per message.
 * The pause starts at STREAK_PAUSE_US and doubles with each further
 * wake-up of the streak, up to STREAK_PAUSE_MAX_US: a long stream is read
 * in batches of ~10 ms, and its outputs reach the caller at most that late.
 * A quiet cell (busy, reply, idle) never forms a streak, so round trips are
 * unaffected. On this VM, where a wake-up is costly, a 20 000-output cell
 * cost our thread 102-124 us per message without batching, ~20-24 us with
 * a fixed 1 ms pause and ~11-12 us with the doubling one. */
#define STREAK_WAKES 4
#define STREAK_GAP_US 2000
#define STREAK_PAUSE_US 1000
#define STREAK_DOUBLINGS 4
#define STREAK_PAUSE_MAX_US 10000

struct kb_client {
    kb_transport_t *tp;          /* owned: how messages travel */
    char session[37];            /* our session id (also routing id) */
    char *username;              /* owned */
    kb_wire_stats_t stats;       /* what was accepted and dropped */
    kb_frames_limits_t limits;   /* frames and total bytes of a message */
    size_t max_output;           /* per-execution output cap */
    int watch_fd;                /* readable when the kernel died; -1 */
    bool use_hb;                 /* ping the heartbeat while waiting */
    kb_msg_t *held[KB_HELD_MAX]; /* owned shell replies a request read that
                           belong to someone else (an execution in flight) */
    size_t nheld;
};

struct kb_exec {
    char msg_id[64];  /* the execute_request's msg_id */
    bool got_reply;   /* execute_reply seen on shell */
    bool got_idle;    /* iopub status idle for it seen */
    int64_t start_us; /* when the request was sent */
};

void
kb_exec_opts_init(kb_exec_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->store_history = true;
    o->stop_on_error = true;
}

kb_client_t *
kb_client_new(const kb_conn_t *conn, const kb_client_opts_t *opts, err_t *err)
{
    kb_client_opts_t defaults = {0};
    if (!opts)
        opts = &defaults;
    if (conn->key[0] == '\0' && !opts->allow_unsigned) {
        err_set(err, ERR_USAGE,
                "the connection file has an empty key (messages would be "
                "unsigned); pass --allow-unsigned if you really mean it");
        return NULL;
    }
    char session[37];
    kb_msg_new_uuid(session);
    int64_t max_msg =
        opts->max_msg_bytes ? opts->max_msg_bytes : DEFAULT_MAX_MSG;
    kb_transport_t *tp =
        kb_transport_zmq_new(conn, session, max_msg, opts->zmq_ctx, err);
    if (!tp)
        return NULL;
    return kb_client_new_transport(&tp, session, opts);
}

kb_client_t *
kb_client_new_transport(kb_transport_t **tp, const char *session,
                        const kb_client_opts_t *opts)
{
    kb_client_opts_t defaults = {0};
    if (!opts)
        opts = &defaults;
    kb_client_t *c = xcalloc(1, sizeof *c);
    c->tp = *tp;
    *tp = NULL;
    c->watch_fd = -1;
    if (session)
        snprintf(c->session, sizeof c->session, "%s", session);
    else
        kb_msg_new_uuid(c->session);
    c->username = xstrdup(opts->username ? opts->username : "jupyter-agent");
    c->max_output =
        opts->max_output_bytes ? opts->max_output_bytes : KB_DEFAULT_MAX_OUTPUT;
    int64_t max_msg =
        opts->max_msg_bytes ? opts->max_msg_bytes : DEFAULT_MAX_MSG;
    c->limits.max_bytes = (size_t)max_msg;
    c->limits.json_allowance =
        c->max_output < JSON_ALLOWANCE_MIN   ? JSON_ALLOWANCE_MIN
        : c->max_output > JSON_ALLOWANCE_MAX ? JSON_ALLOWANCE_MAX
                                             : c->max_output;
    return c;
}

void
kb_client_destroy(kb_client_t **pc)
{
    if (!pc || !*pc)
        return;
    kb_client_t *c = *pc;
    for (size_t i = 0; i < c->nheld; i++)
        kb_msg_destroy(&c->held[i]);
    if (c->tp)
        c->tp->ops->destroy(c->tp);
    free(c->username);
    free(c);
    *pc = NULL;
}

void
kb_client_watch_fd(kb_client_t *c, int fd)
{
    c->watch_fd = fd;
}

void
kb_client_use_heartbeat(kb_client_t *c, bool on)
{
    c->use_hb = on;
}

const kb_wire_stats_t *
kb_client_stats(kb_client_t *c)
{
    if (c->tp->ops->collect)
        c->tp->ops->collect(c->tp, &c->stats);
    return &c->stats;
}

static int
s_send(kb_client_t *c, kb_channel_t ch, const kb_msg_t *msg, err_t *err)
{
    return c->tp->ops->send(c->tp, ch, msg, err);
}

/* The budget of one drain round on one channel. */
typedef struct s_round {
    int n;         /* messages read so far, dropped ones included */
    int64_t until; /* CLOCK_MONOTONIC ms when the round ends */
} s_round_t;

static s_round_t
s_round(void)
{
    return (s_round_t){0, clock_mono_ms() + DRAIN_MS};
}

/* The next message from `ch` without blocking, skipping dropped ones
 * (counted in c->stats); NULL when none is waiting or the round's budget
 * is spent. `lim` NULL = the client's limits. */
static kb_msg_t *
s_next(kb_client_t *c, kb_channel_t ch, const kb_frames_limits_t *lim,
       s_round_t *r)
{
    while (r->n < DRAIN_MAX && clock_mono_ms() < r->until) {
        err_t err = {0}; /* recv clears it; {0} if a transport forgets */
        r->n++;
        kb_msg_t *msg = c->tp->ops->recv(c->tp, ch, lim ? lim : &c->limits,
                                         &c->stats, &err);
        if (msg || !err.code)
            return msg;
        log_debug("%s: %s", kb_channel_name(ch), err.text);
    }
    return NULL;
}

/* The oldest held shell message, or NULL. */
static kb_msg_t *
s_take_held(kb_client_t *c)
{
    if (!c->nheld)
        return NULL;
    kb_msg_t *m = c->held[0];
    memmove(c->held, c->held + 1, --c->nheld * sizeof c->held[0]);
    return m;
}

/* Wait up to `ms` for any channel in `mask` (bit per channel) or the
 * watch fd. Returns a bitmask of ready channels, KB_TRANSPORT_GONE when the
 * kernel is gone, or 0 on timeout. */
static unsigned
s_poll(kb_client_t *c, unsigned mask, int ms)
{
    return c->tp->ops->poll(c->tp, mask, c->watch_fd, ms);
}

static kb_msg_t *
s_new_msg(kb_client_t *c, const char *type, json_t *content)
{
    kb_msg_t *msg = kb_msg_new(type, c->session, c->username);
    kb_msg_set_content(msg, content ? content : json_object());
    return msg;
}

kb_msg_t *
kb_client_request(kb_client_t *c, kb_channel_t ch, const char *msg_type,
                  json_t *content, int timeout_ms, err_t *err)
{
    kb_msg_t *req = s_new_msg(c, msg_type, content);
    kb_msg_t *reply = NULL;
    if (s_send(c, ch, req, err))
        goto out;
    int64_t deadline = clock_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            err_set(err, ERR_TIMEOUT, "no %s reply within %d ms", msg_type,
                    timeout_ms);
            goto out;
        }
        /* Only our channel: iopub may carry the outputs and the idle
         * status of an execution in flight (e.g. while we ask to interrupt
         * it), which its own wait must still see. */
        unsigned ready =
            s_poll(c, 1u << ch, left < TICK_MS ? (int)left : TICK_MS);
        if (ready & KB_TRANSPORT_GONE) {
            err_set(err, ERR_KERNEL, "the kernel exited while waiting for %s",
                    msg_type);
            goto out;
        }
        if (!(ready & (1u << ch)))
            continue;
        kb_msg_t *m;
        s_round_t r = s_round();
        while ((m = s_next(c, ch, NULL, &r))) {
            if (!reply && strcmp(kb_msg_parent_id(m), kb_msg_id(req)) == 0)
                reply = m;
            else if (ch == KB_SHELL && c->nheld < KB_HELD_MAX)
                c->held[c->nheld++] = m; /* e.g. an execute_reply */
            else
                kb_msg_destroy(&m);
        }
        if (reply)
            goto out;
    }
out:
    kb_msg_destroy(&req);
    return reply;
}

int
kb_client_send_pump(kb_client_t *c, const char *msg_type, json_t *content,
                    void (*on_iopub)(const kb_msg_t *msg, void *arg), void *arg,
                    int timeout_ms, err_t *err)
{
    kb_msg_t *req = s_new_msg(c, msg_type, content);
    int rc = -1;
    if (s_send(c, KB_SHELL, req, err))
        goto out;
    int64_t deadline = clock_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            err_set(err, ERR_TIMEOUT,
                    "the kernel was not idle after %s "
                    "within %d ms",
                    msg_type, timeout_ms);
            goto out;
        }
        unsigned ready =
            s_poll(c, 1u << KB_IOPUB, left < TICK_MS ? (int)left : TICK_MS);
        if (ready & KB_TRANSPORT_GONE) {
            err_set(err, ERR_KERNEL, "the kernel exited after %s", msg_type);
            goto out;
        }
        kb_msg_t *m;
        bool idle = false;
        kb_frames_limits_t lim = c->limits;
        lim.parent_id = kb_msg_id(req);
        s_round_t r = s_round();
        while (!idle && (ready & (1u << KB_IOPUB)) &&
               (m = s_next(c, KB_IOPUB, &lim, &r))) {
            if (strcmp(kb_msg_parent_id(m), kb_msg_id(req)) == 0) {
                const char *state = json_string_value(
                    json_object_get(kb_msg_content(m), "execution_state"));
                idle = !strcmp(kb_msg_type(m), "status") && state &&
                       !strcmp(state, "idle");
                if (on_iopub && !idle)
                    on_iopub(m, arg);
            }
            kb_msg_destroy(&m);
        }
        if (idle) {
            rc = 0;
            goto out;
        }
    }
out:
    kb_msg_destroy(&req);
    return rc;
}

/* True if `id` is one of the `n` request ids in `ids`. */
static bool
s_is_ours(char ids[][40], size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ids[i], id) == 0)
            return true;
    return false;
}

kb_msg_t *
kb_client_wait_ready(kb_client_t *c, int timeout_ms, err_t *err)
{
    /* A request sent before the kernel bound its sockets is queued, but the
     * iopub subscription may lag behind the reply; so resend every
     * READY_RESEND_MS until one reply AND iopub traffic for any of our
     * requests have arrived; once a reply came without iopub traffic (the
     * kernel is up, our subscription was late), every READY_IOPUB_MS. */
    enum { READY_RESEND_MS = 200, READY_IOPUB_MS = 20, READY_MAX_IDS = 64 };
    char ids[READY_MAX_IDS][40];
    size_t nids = 0;
    int64_t deadline = clock_mono_ms() + timeout_ms, next_send = 0;
    kb_msg_t *reply = NULL;
    bool iopub_seen = false;

    while (clock_mono_ms() < deadline) {
        int64_t now = clock_mono_ms();
        if (now >= next_send && !(reply && iopub_seen)) {
            kb_msg_t *req = s_new_msg(c, "kernel_info_request", NULL);
            int rc = s_send(c, KB_SHELL, req, err);
            snprintf(ids[nids % READY_MAX_IDS], sizeof ids[0], "%s",
                     kb_msg_id(req));
            nids++;
            kb_msg_destroy(&req);
            if (rc)
                goto fail;
            next_send = now + (reply ? READY_IOPUB_MS : READY_RESEND_MS);
        }
        size_t known = nids < READY_MAX_IDS ? nids : READY_MAX_IDS;
        unsigned ready = s_poll(c, (1u << KB_SHELL) | (1u << KB_IOPUB), 20);
        if (ready & KB_TRANSPORT_GONE) {
            err_set(err, ERR_KERNEL, "the kernel exited during start-up");
            goto fail;
        }
        kb_msg_t *m;
        s_round_t r = s_round();
        while ((m = s_next(c, KB_IOPUB, NULL, &r))) {
            iopub_seen |= s_is_ours(ids, known, kb_msg_parent_id(m));
            kb_msg_destroy(&m);
        }
        r = s_round();
        while ((m = s_next(c, KB_SHELL, NULL, &r))) {
            if (!reply && strcmp(kb_msg_type(m), "kernel_info_reply") == 0 &&
                s_is_ours(ids, known, kb_msg_parent_id(m))) {
                reply = m;
                int64_t soon = clock_mono_ms() + READY_IOPUB_MS;
                if (next_send > soon)
                    next_send = soon;
            } else
                kb_msg_destroy(&m);
        }
        if (reply && iopub_seen && c->tp->ops->ready(c->tp))
            return reply;
    }
    err_set(err, ERR_TIMEOUT,
            "the kernel did not answer kernel_info within %d ms (reply: %s, "
            "iopub: %s, stdin handshake: %s)",
            timeout_ms, reply ? "yes" : "no", iopub_seen ? "yes" : "no",
            c->tp->ops->ready(c->tp) ? "yes" : "no");
fail:
    kb_msg_destroy(&reply);
    return NULL;
}

kb_exec_t *
kb_client_execute_start(kb_client_t *c, const char *code,
                        const kb_exec_opts_t *opts, err_t *err)
{
    kb_exec_opts_t defaults;
    if (!opts) {
        kb_exec_opts_init(&defaults);
        opts = &defaults;
    }
    json_t *content = json_pack(
        "{s:s, s:b, s:b, s:b, s:b}", "code", code, "silent", opts->silent,
        "store_history", opts->store_history, "allow_stdin", opts->allow_stdin,
        "stop_on_error", opts->stop_on_error);
    if (opts->user_expressions)
        json_object_set(content, "user_expressions", opts->user_expressions);
    else
        json_object_set_new(content, "user_expressions", json_object());
    kb_msg_t *req = s_new_msg(c, "execute_request", content);
    kb_exec_t *x = NULL;
    if (s_send(c, KB_SHELL, req, err) == 0) {
        x = xcalloc(1, sizeof *x);
        snprintf(x->msg_id, sizeof x->msg_id, "%s", kb_msg_id(req));
        x->start_us = clock_mono_us();
    }
    kb_msg_destroy(&req);
    return x;
}

void
kb_exec_destroy(kb_exec_t **px)
{
    if (!px || !*px)
        return;
    free(*px);
    *px = NULL;
}

static void
s_answer_input(kb_client_t *c, const kb_msg_t *req,
               const kb_exec_hooks_t *hooks)
{
    json_t *content = kb_msg_content(req);
    const char *prompt = json_string_value(json_object_get(content, "prompt"));
    bool password = json_is_true(json_object_get(content, "password"));
    char *value = NULL;
    if (hooks && hooks->on_input)
        value = hooks->on_input(prompt ? prompt : "", password, hooks->arg);
    kb_msg_t *reply = s_new_msg(
        c, "input_reply", json_pack("{s:s}", "value", value ? value : ""));
    kb_msg_set_parent(reply, req);
    err_t err;
    if (s_send(c, KB_STDIN, reply, &err))
        log_warn("input_reply: %s", err.text);
    kb_msg_destroy(&reply);
    free(value);
}

static void
s_on_shell(kb_exec_t *x, kb_msg_t *m, kb_output_t *out)
{
    if (strcmp(kb_msg_parent_id(m), x->msg_id) != 0 ||
        strcmp(kb_msg_type(m), "execute_reply") != 0)
        return;
    x->got_reply = true;
    json_t *content = kb_msg_content(m);
    json_t *count = json_object_get(content, "execution_count");
    if (json_is_integer(count))
        kb_output_set_execution_count(out, (int)json_integer_value(count));
    const char *status = json_string_value(json_object_get(content, "status"));
    kb_output_set_status(out, status ? status : "error");
    kb_output_set_payload(out, json_object_get(content, "payload"));
    kb_output_set_user_expressions(
        out, json_object_get(content, "user_expressions"));
}

int
kb_client_execute_wait(kb_client_t *c, kb_exec_t *x, kb_output_t *out,
                       const kb_exec_hooks_t *hooks, int64_t deadline_ms,
                       err_t *err)
{
    const unsigned mask = (1u << KB_SHELL) | (1u << KB_IOPUB) |
                          (1u << KB_STDIN) | (1u << KB_CONTROL);
    int rc = 0, streak = 0;
    int64_t last_drain = 0, next_stop_check = 0;
    while (!(x->got_reply && x->got_idle)) {
        int wait = TICK_MS;
        if (deadline_ms > 0) {
            int64_t left = deadline_ms - clock_mono_ms();
            if (left <= 0) {
                rc = err_set(err, ERR_TIMEOUT, "execution timed out");
                break;
            }
            if (left < wait)
                wait = (int)left;
        }
        /* should_stop and the heartbeat once per tick, not once per
         * wake-up: a streaming cell wakes us thousands of times a second. */
        int64_t now_ms = clock_mono_ms();
        if (now_ms >= next_stop_check) {
            next_stop_check = now_ms + TICK_MS;
            if (hooks && hooks->should_stop && hooks->should_stop(hooks->arg)) {
                rc = err_set(err, ERR_INTERRUPTED, "interrupted");
                break;
            }
            if (c->tp->ops->tick(c->tp, c->use_hb, err)) {
                rc = -1;
                break;
            }
        }
        unsigned ready = s_poll(c, mask, wait);
        /* Read only the channels the poll found ready: an empty receive
         * still costs libzmq system calls. When the kernel is gone, read
         * them all for what it sent before dying. */
        if (ready & KB_TRANSPORT_GONE)
            ready |= mask;
        kb_msg_t *m;
        /* Drain iopub before looking at the death signal, so outputs the
         * kernel sent before dying are kept. Messages of other parents, and
         * once the cap is reached everything but status, are dropped
         * before they are hashed or parsed. */
        int drained = 0;
        kb_frames_limits_t lim = c->limits;
        lim.parent_id = x->msg_id;
        if (c->max_output < SIZE_MAX - IOPUB_SLACK_BYTES &&
            c->max_output + IOPUB_SLACK_BYTES < lim.max_bytes)
            lim.max_bytes = c->max_output + IOPUB_SLACK_BYTES;
        s_round_t r = s_round();
        while (ready & (1u << KB_IOPUB)) {
            if (kb_output_truncated(out)) {
                lim.status_only = true;
                if (lim.max_bytes > STATUS_MAX_BYTES)
                    lim.max_bytes = STATUS_MAX_BYTES;
            }
            uint64_t oversized = c->stats.oversized;
            m = s_next(c, KB_IOPUB, &lim, &r);
            /* Past the budget's cap: an output that cannot fit was dropped
             * unread (its parent unknown), so what is stored is cut. */
            if (c->stats.oversized > oversized &&
                lim.max_bytes < c->limits.max_bytes)
                kb_output_mark_truncated(out);
            if (!m)
                break;
            drained++;
            if (strcmp(kb_msg_parent_id(m), x->msg_id) == 0) {
                const char *type = kb_msg_type(m);
                json_t *content = kb_msg_content(m);
                const char *state = json_string_value(
                    json_object_get(content, "execution_state"));
                if (strcmp(type, "status") == 0 && state &&
                    strcmp(state, "idle") == 0)
                    x->got_idle = true;
                bool was_cut = kb_output_truncated(out);
                kb_output_feed(out, type, content);
                /* An output past the cap is neither stored nor shown (nor
                 * saved by a hook as an image file). */
                bool refused = kb_output_truncated(out) && !was_cut &&
                               kb_output_is_output_type(type);
                if (hooks && hooks->on_iopub && !refused)
                    hooks->on_iopub(m, hooks->arg);
            }
            kb_msg_destroy(&m);
        }
        r = s_round();
        while ((m = s_take_held(c)) || ((ready & (1u << KB_SHELL)) &&
                                        (m = s_next(c, KB_SHELL, NULL, &r)))) {
            s_on_shell(x, m, out);
            kb_msg_destroy(&m);
        }
        r = s_round();
        while ((ready & (1u << KB_STDIN)) &&
               (m = s_next(c, KB_STDIN, NULL, &r))) {
            if (strcmp(kb_msg_type(m), "input_request") == 0)
                s_answer_input(c, m, hooks);
            kb_msg_destroy(&m);
        }
        r = s_round();
        while ((ready & (1u << KB_CONTROL)) &&
               (m = s_next(c, KB_CONTROL, NULL, &r))) /* interrupt replies */
            kb_msg_destroy(&m);
        if (ready & KB_TRANSPORT_GONE) {
            /* The transport may know why (e.g. a server's own words). */
            if (c->tp->ops->tick(c->tp, c->use_hb, err) == 0)
                err_set(err, ERR_KERNEL, "the kernel died");
            rc = -1;
            break;
        }
        /* iopub ready without a whole message (our reader got part of
         * one) is still the stream going on: it must not end the streak. */
        if (drained || (ready & (1u << KB_IOPUB))) {
            int64_t now = clock_mono_us();
            streak = now - last_drain <= STREAK_GAP_US ? streak + 1 : 1;
            if (streak >= STREAK_WAKES && !x->got_idle) {
                int doublings = streak - STREAK_WAKES;
                long pause =
                    (long)STREAK_PAUSE_US
                    << (doublings < STREAK_DOUBLINGS ? doublings
                                                     : STREAK_DOUBLINGS);
                if (pause > STREAK_PAUSE_MAX_US)
                    pause = STREAK_PAUSE_MAX_US;
                nanosleep(&(struct timespec){0, pause * 1000L}, NULL);
                now = clock_mono_us(); /* the gap is counted after it */
            }
            last_drain = now;
        } else {
            streak = 0;
        }
    }
    kb_output_set_duration_ms(out, (clock_mono_us() - x->start_us) / 1000);
    return rc;
}

int
kb_client_heartbeat(kb_client_t *c, int timeout_ms)
{
    return c->tp->ops->ping(c->tp, timeout_ms);
}
