/* Unit tests for kb_server: the kernel side of the protocol, driven by raw
 * zmq client sockets in the same process (the server runs in a thread). */
#include "../tap.h"

#include "kernel-bridge/kb_conn.h"
#include "kernel-bridge/kb_server.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define WAIT_MS 5000

typedef struct client {
    void *ctx;                /* zmq context */
    void *sock[KB_NCHANNELS]; /* DEALER x3, SUB, REQ */
    kb_key_t *key;            /* the connection's key */
    kb_key_t *wrong;          /* another key, for forgeries */
} client_t;

/* What the test handlers saw and should do. */
static atomic_int s_hold;         /* the "slow" handler waits while set */
static atomic_int s_slow_running; /* the slow handler has started */
static atomic_uint s_slow_events; /* what poll_control said in it */
static char *s_input_value;       /* what the "ask" handler got */
static int s_input_err;           /* its err.code */

static kb_server_t *s_server;

static void
s_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int
s_echo(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    (void)arg;
    return kb_server_reply(
        s, ch, req, "echo_reply",
        json_pack("{s:s, s:O}", "status", "ok", "got", kb_msg_content(req)),
        NULL);
}

static int
s_slow(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    (void)arg;
    atomic_store(&s_slow_running, 1);
    unsigned ev = 0;
    while (atomic_load(&s_hold) &&
           !((ev = kb_server_poll_control(s, 50)) & KB_SERVER_INTERRUPT))
        ;
    atomic_store(&s_slow_events, ev);
    return kb_server_reply(s, ch, req, "slow_reply",
                           json_pack("{s:s}", "status", "ok"), NULL);
}

static int
s_ask(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    (void)arg;
    err_t err = {0};
    free(s_input_value);
    s_input_value = kb_server_input(s, req, "name? ", false, WAIT_MS, &err);
    s_input_err = err.code;
    return kb_server_reply(s, ch, req, "ask_reply",
                           json_pack("{s:s}", "status", "ok"), NULL);
}

/* An execute_request handler that fails cells saying "fail". */
static int
s_execute(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    (void)arg;
    const char *code =
        json_string_value(json_object_get(kb_msg_content(req), "code"));
    bool fail = code && strcmp(code, "fail") == 0;
    if (fail)
        kb_server_abort_queued(s);
    return kb_server_reply(s, ch, req, "execute_reply",
                           json_pack("{s:s, s:i}", "status",
                                     fail ? "error" : "ok", "execution_count",
                                     1),
                           NULL);
}

static void *
s_serve(void *arg)
{
    kb_server_run(arg);
    return NULL;
}

static void
s_send(client_t *c, kb_channel_t ch, kb_msg_t *m, bool forge)
{
    kb_wire_out_t out;
    kb_wire_serialize(m, forge ? c->wrong : c->key, &out, NULL);
    for (size_t i = 0; i < out.n; i++)
        zmq_send(c->sock[ch], out.frames[i].data, out.frames[i].len,
                 i + 1 < out.n ? ZMQ_SNDMORE : 0);
    kb_wire_out_release(&out);
}

static kb_msg_t *
s_request(client_t *c, kb_channel_t ch, const char *type, json_t *content,
          bool forge)
{
    kb_msg_t *m = kb_msg_new(type, "client-session", "tester");
    kb_msg_set_content(m, content ? content : json_object());
    s_send(c, ch, m, forge);
    return m;
}

/* Receive one message on `ch` within ms; NULL on timeout. */
static kb_msg_t *
s_recv(client_t *c, kb_channel_t ch, int ms)
{
    zmq_pollitem_t it = {c->sock[ch], 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0)
        return NULL;
    zmq_msg_t parts[16];
    kb_frame_t views[16];
    size_t n = 0;
    int more = 1;
    while (more && n < 16) {
        zmq_msg_init(&parts[n]);
        zmq_msg_recv(&parts[n], c->sock[ch], 0);
        more = zmq_msg_more(&parts[n]);
        views[n] =
            (kb_frame_t){zmq_msg_data(&parts[n]), zmq_msg_size(&parts[n])};
        n++;
    }
    kb_msg_t *m = kb_wire_parse(views, n, c->key, NULL, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return m;
}

/* The next message on `ch` answering `req`, skipping others. */
static kb_msg_t *
s_reply_to(client_t *c, kb_channel_t ch, const kb_msg_t *req, int ms)
{
    kb_msg_t *m;
    while ((m = s_recv(c, ch, ms))) {
        if (strcmp(kb_msg_parent_id(m), kb_msg_id(req)) == 0)
            return m;
        kb_msg_destroy(&m);
    }
    return NULL;
}

static void
s_client_open(client_t *c, const kb_conn_t *conn)
{
    static const int types[KB_NCHANNELS] = {[KB_SHELL] = ZMQ_DEALER,
                                            [KB_IOPUB] = ZMQ_SUB,
                                            [KB_STDIN] = ZMQ_DEALER,
                                            [KB_CONTROL] = ZMQ_DEALER,
                                            [KB_HB] = ZMQ_REQ};
    c->ctx = zmq_ctx_new();
    c->key = kb_key_new(conn->key, strlen(conn->key));
    c->wrong = kb_key_new("not-the-key", 11);
    for (int ch = 0; ch < KB_NCHANNELS; ch++) {
        char ep[256];
        c->sock[ch] = zmq_socket(c->ctx, types[ch]);
        int linger = 0;
        zmq_setsockopt(c->sock[ch], ZMQ_LINGER, &linger, sizeof linger);
        if (types[ch] == ZMQ_DEALER)
            zmq_setsockopt(c->sock[ch], ZMQ_ROUTING_ID, "client-1", 8);
        if (types[ch] == ZMQ_SUB)
            zmq_setsockopt(c->sock[ch], ZMQ_SUBSCRIBE, "", 0);
        kb_conn_endpoint(conn, (kb_channel_t)ch, ep, sizeof ep);
        zmq_connect(c->sock[ch], ep);
    }
}

static void
s_client_close(client_t *c)
{
    for (int ch = 0; ch < KB_NCHANNELS; ch++)
        zmq_close(c->sock[ch]);
    zmq_ctx_term(c->ctx);
    kb_key_destroy(&c->key);
    kb_key_destroy(&c->wrong);
}

/* Drain iopub, returning the execution_state sequence for `req`
 * ("busy,idle"). */
static void
s_states(client_t *c, const kb_msg_t *req, char *out, size_t size)
{
    out[0] = '\0';
    kb_msg_t *m;
    while ((m = s_recv(c, KB_IOPUB, 300))) {
        if (strcmp(kb_msg_type(m), "status") == 0 &&
            strcmp(kb_msg_parent_id(m), kb_msg_id(req)) == 0) {
            const char *st = json_string_value(
                json_object_get(kb_msg_content(m), "execution_state"));
            if (out[0])
                strncat(out, ",", size - strlen(out) - 1);
            strncat(out, st ? st : "?", size - strlen(out) - 1);
        }
        kb_msg_destroy(&m);
    }
}

int
main(void)
{
    char dir[] = "/tmp/kbserverXXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s/k", dir);
    kb_conn_t conn;
    err_t err = {0};

    /* An unsigned connection is refused unless asked for. */
    kb_conn_init_ipc(&conn, prefix, &err);
    free(conn.key);
    conn.key = strdup("");
    ok(kb_server_new(&conn, NULL, &err) == NULL && err.code == ERR_USAGE,
       "a connection with an empty key is refused by default");
    kb_conn_release(&conn);

    kb_conn_init_ipc(&conn, prefix, &err);
    s_server = kb_server_new(&conn, NULL, &err);
    if (!ok(s_server != NULL, "binds every channel of an ipc connection")) {
        diag("%s", err.text);
        return done_testing();
    }
    kb_server_on(s_server, "echo_request", s_echo, NULL);
    kb_server_on(s_server, "slow_request", s_slow, NULL);
    kb_server_on(s_server, "ask_request", s_ask, NULL);
    kb_server_on(s_server, "execute_request", s_execute, NULL);
    kb_server_on_control(s_server, "echo_request", s_echo, NULL);
    pthread_t thread;
    pthread_create(&thread, NULL, s_serve, s_server);

    client_t c;
    s_client_open(&c, &conn);
    s_sleep_ms(200); /* let the SUB subscription reach the PUB */

    /* A request is answered through the handler table. */
    kb_msg_t *req = s_request(&c, KB_SHELL, "echo_request",
                              json_pack("{s:i}", "n", 7), false);
    kb_msg_t *rep = s_reply_to(&c, KB_SHELL, req, WAIT_MS);
    ok(rep && strcmp(kb_msg_type(rep), "echo_reply") == 0,
       "a shell request reaches its handler and the reply comes back");
    ok(rep && json_integer_value(json_object_get(
                  json_object_get(kb_msg_content(rep), "got"), "n")) == 7,
       "the handler sees the request's content");
    is_str(
        rep ? json_string_value(json_object_get(kb_msg_metadata(rep), "status"))
            : NULL,
        "ok", "the reply's status is mirrored into its metadata");
    char states[128];
    s_states(&c, req, states, sizeof states);
    is_str(states, "busy,idle",
           "status busy then idle is published around the request, with "
           "the request as parent");
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    /* A forged request is dropped unparsed and counted. */
    uint64_t bad_before = kb_server_stats(s_server)->bad_signature;
    req = s_request(&c, KB_SHELL, "echo_request", NULL, true);
    rep = s_reply_to(&c, KB_SHELL, req, 500);
    ok(rep == NULL, "a request signed with the wrong key gets no reply");
    is_int(kb_server_stats(s_server)->bad_signature, bad_before + 1,
           "the tampered frame is counted as a bad signature");
    s_states(&c, req, states, sizeof states);
    is_str(states, "", "no status is published for a dropped request");
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    /* Unknown types are ignored, and the server keeps serving. */
    req = s_request(&c, KB_SHELL, "no_such_request", NULL, false);
    rep = s_reply_to(&c, KB_SHELL, req, 300);
    ok(rep == NULL, "an unknown request type is left unanswered");
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    /* While a shell handler runs: heartbeat, control, interrupt. */
    atomic_store(&s_hold, 1);
    req = s_request(&c, KB_SHELL, "slow_request", NULL, false);
    for (int i = 0; i < 100 && !atomic_load(&s_slow_running); i++)
        s_sleep_ms(20);
    zmq_send(c.sock[KB_HB], "ping", 4, 0);
    zmq_pollitem_t hb = {c.sock[KB_HB], 0, ZMQ_POLLIN, 0};
    char pong[8] = "";
    if (zmq_poll(&hb, 1, WAIT_MS) > 0)
        zmq_recv(c.sock[KB_HB], pong, sizeof pong, 0);
    ok(memcmp(pong, "ping", 4) == 0,
       "the heartbeat is echoed while a shell handler is busy");
    kb_msg_t *creq = s_request(&c, KB_CONTROL, "echo_request", NULL, false);
    kb_msg_t *crep = s_reply_to(&c, KB_CONTROL, creq, WAIT_MS);
    ok(crep != NULL, "a control request is answered while shell is busy");
    kb_msg_destroy(&creq);
    kb_msg_destroy(&crep);
    ok(!(kb_server_events(s_server) & KB_SERVER_INTERRUPT) &&
           atomic_load(kb_server_cancel_flag(s_server)) == 0,
       "no interrupt is latched before one is asked for");
    creq = s_request(&c, KB_CONTROL, "interrupt_request", NULL, false);
    crep = s_reply_to(&c, KB_CONTROL, creq, WAIT_MS);
    ok(crep && strcmp(kb_msg_type(crep), "interrupt_reply") == 0,
       "interrupt_request is answered on control");
    rep = s_reply_to(&c, KB_SHELL, req, WAIT_MS);
    ok(rep != NULL && (atomic_load(&s_slow_events) & KB_SERVER_INTERRUPT),
       "the busy handler sees the interrupt through poll_control");
    ok(atomic_load(kb_server_cancel_flag(s_server)) == 1,
       "the cancel flag is set while the interrupt is latched");
    kb_msg_destroy(&creq);
    kb_msg_destroy(&crep);
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    req = s_request(&c, KB_SHELL, "echo_request", NULL, false);
    rep = s_reply_to(&c, KB_SHELL, req, WAIT_MS);
    ok(rep && atomic_load(kb_server_cancel_flag(s_server)) == 0,
       "the next request starts with the interrupt cleared");
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    /* input(): input_request goes to the requester's stdin. */
    req = s_request(&c, KB_SHELL, "ask_request", NULL, false);
    kb_msg_t *ireq = s_recv(&c, KB_STDIN, WAIT_MS);
    ok(ireq && strcmp(kb_msg_type(ireq), "input_request") == 0 &&
           strcmp(kb_msg_parent_id(ireq), kb_msg_id(req)) == 0,
       "input_request reaches the requester's stdin with the request as "
       "parent");
    is_str(ireq ? json_string_value(
                      json_object_get(kb_msg_content(ireq), "prompt"))
                : NULL,
           "name? ", "the prompt is passed on");
    kb_msg_t *ans = s_request(&c, KB_STDIN, "input_reply",
                              json_pack("{s:s}", "value", "Ada"), false);
    rep = s_reply_to(&c, KB_SHELL, req, WAIT_MS);
    is_str(s_input_value, "Ada", "the input_reply's value is returned");
    kb_msg_destroy(&ireq);
    kb_msg_destroy(&ans);
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    /* An interrupt ends a pending input(). */
    req = s_request(&c, KB_SHELL, "ask_request", NULL, false);
    ireq = s_recv(&c, KB_STDIN, WAIT_MS);
    creq = s_request(&c, KB_CONTROL, "interrupt_request", NULL, false);
    rep = s_reply_to(&c, KB_SHELL, req, WAIT_MS);
    ok(rep && s_input_value == NULL && s_input_err == ERR_INTERRUPTED,
       "an interrupt ends a pending input() with ERR_INTERRUPTED");
    kb_msg_destroy(&ireq);
    kb_msg_destroy(&creq);
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    /* stop_on_error: what was queued behind a failed cell is aborted. */
    atomic_store(&s_hold, 1);
    atomic_store(&s_slow_running, 0);
    kb_msg_t *slow = s_request(&c, KB_SHELL, "slow_request", NULL, false);
    for (int i = 0; i < 100 && !atomic_load(&s_slow_running); i++)
        s_sleep_ms(20);
    kb_msg_t *fail = s_request(&c, KB_SHELL, "execute_request",
                               json_pack("{s:s}", "code", "fail"), false);
    kb_msg_t *next = s_request(&c, KB_SHELL, "execute_request",
                               json_pack("{s:s}", "code", "1"), false);
    kb_msg_t *info = s_request(&c, KB_SHELL, "echo_request", NULL, false);
    s_sleep_ms(200);
    atomic_store(&s_hold, 0);
    kb_msg_t *r1 = s_reply_to(&c, KB_SHELL, slow, WAIT_MS);
    kb_msg_t *r2 = s_reply_to(&c, KB_SHELL, fail, WAIT_MS);
    kb_msg_t *r3 = s_reply_to(&c, KB_SHELL, next, WAIT_MS);
    kb_msg_t *r4 = s_reply_to(&c, KB_SHELL, info, WAIT_MS);
    ok(r1 && r2, "the slow and the failing requests are answered");
    is_str(r3 ? json_string_value(json_object_get(kb_msg_content(r3), "status"))
              : NULL,
           "aborted",
           "an execute_request queued behind a failed one is aborted");
    ok(r4 && strcmp(kb_msg_type(r4), "echo_reply") == 0,
       "other requests queued behind it still run");
    kb_msg_destroy(&slow);
    kb_msg_destroy(&fail);
    kb_msg_destroy(&next);
    kb_msg_destroy(&info);
    kb_msg_destroy(&r1);
    kb_msg_destroy(&r2);
    kb_msg_destroy(&r3);
    kb_msg_destroy(&r4);
    req = s_request(&c, KB_SHELL, "execute_request",
                    json_pack("{s:s}", "code", "1"), false);
    rep = s_reply_to(&c, KB_SHELL, req, WAIT_MS);
    is_str(
        rep ? json_string_value(json_object_get(kb_msg_content(rep), "status"))
            : NULL,
        "ok", "a request sent after the failure was seen runs normally");
    kb_msg_destroy(&req);
    kb_msg_destroy(&rep);

    /* shutdown_request ends kb_server_run. */
    creq = s_request(&c, KB_CONTROL, "shutdown_request",
                     json_pack("{s:b}", "restart", 0), false);
    crep = s_reply_to(&c, KB_CONTROL, creq, WAIT_MS);
    ok(crep && strcmp(kb_msg_type(crep), "shutdown_reply") == 0,
       "shutdown_request is answered on control");
    pthread_join(thread, NULL);
    ok(kb_server_events(s_server) & KB_SERVER_SHUTDOWN,
       "kb_server_run returns after a shutdown_request");
    kb_msg_destroy(&crep);
    kb_server_destroy(&s_server);
    ok(s_server == NULL, "destroy nulls the caller's pointer");
    rep = s_reply_to(&c, KB_IOPUB, creq, WAIT_MS);
    while (rep && strcmp(kb_msg_type(rep), "shutdown_reply") != 0) {
        kb_msg_destroy(&rep);
        rep = s_reply_to(&c, KB_IOPUB, creq, 500);
    }
    ok(rep != NULL, "the shutdown_reply is broadcast on iopub at exit");
    kb_msg_destroy(&rep);
    kb_msg_destroy(&creq);

    s_client_close(&c);
    kb_conn_release(&conn);
    free(s_input_value);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
