/* kb_zmtp_sub against real libzmq PUB and XPUB sockets (the library and
 * the wire ipykernel's iopub uses): connect before the bind, the
 * subscription, multipart messages of every size in order over ipc, TCP on
 * IPv4 and IPv6, the size cap, and reconnecting to a restarted publisher. */
#include "../tap.h"

#include "common/clock.h"
#include "kernel-bridge/transport/kb_zmtp_sub.h"
#include "kernel-bridge/wire/kb_frames.h"

#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

/* Pump the reader until it yields something or `ms` pass. */
static kb_zmtp_next_t
s_wait(kb_zmtp_sub_t *s, kb_frame_t *f, size_t *n, int ms)
{
    int64_t until = clock_mono_ms() + ms;
    while (clock_mono_ms() < until) {
        kb_zmtp_next_t r = kb_zmtp_sub_next(s, f, n);
        if (r != KB_ZMTP_SUB_NONE)
            return r;
        int fd, to = 20;
        short ev;
        if (kb_zmtp_sub_poll_setup(s, true, &fd, &ev, &to))
            continue;
        struct pollfd p = {fd, ev, 0};
        int rc = fd >= 0 ? poll(&p, 1, to) : (usleep((unsigned)to * 1000), 0);
        kb_zmtp_sub_poll_done(s, rc > 0 ? p.revents : 0);
    }
    return KB_ZMTP_SUB_NONE;
}

/* Publish "probe" until the reader sees one: a PUB drops what it sends
 * before the subscription arrives, as with any SUB. */
static bool
s_joined(void *pub, kb_zmtp_sub_t *s)
{
    kb_frame_t f[KB_FRAMES_MAX];
    size_t n;
    for (int i = 0; i < 300; i++) {
        zmq_send(pub, "probe", 5, ZMQ_DONTWAIT);
        if (s_wait(s, f, &n, 10) == KB_ZMTP_SUB_MSG && n == 1 &&
            f[0].len == 5 && !memcmp(f[0].data, "probe", 5))
            return true;
    }
    return false;
}

/* Skip probes still in flight; the next real message. */
static kb_zmtp_next_t
s_next_real(kb_zmtp_sub_t *s, kb_frame_t *f, size_t *n)
{
    kb_zmtp_next_t r;
    do
        r = s_wait(s, f, n, 5000);
    while (r == KB_ZMTP_SUB_MSG && *n == 1 && f[0].len == 5 &&
           !memcmp(f[0].data, "probe", 5));
    return r;
}

/* Message i: 1 + i % 5 frames; frame j of length (i * 7919 + j * 104729)
 * % 3000, every 97th message carries a 1 MiB frame. Byte k of frame j of
 * message i is (i + j + k) & 0xff. */
static size_t
s_len(int i, int j)
{
    if (i % 97 == 0 && j == 0)
        return (size_t)1 << 20;
    return (size_t)(i * 7919 + j * 104729) % 3000;
}

static void
s_publish(void *pub, int i, uint8_t *scratch)
{
    int frames = 1 + i % 5;
    for (int j = 0; j < frames; j++) {
        size_t len = s_len(i, j);
        for (size_t k = 0; k < len; k++)
            scratch[k] = (uint8_t)(i + j + k);
        zmq_send(pub, scratch, len, j + 1 < frames ? ZMQ_SNDMORE : 0);
    }
}

static bool
s_matches(int i, const kb_frame_t *f, size_t n)
{
    if (n != (size_t)(1 + i % 5))
        return false;
    for (size_t j = 0; j < n; j++) {
        if (f[j].len != s_len(i, (int)j))
            return false;
        const uint8_t *p = f[j].data;
        for (size_t k = 0; k < f[j].len; k++)
            if (p[k] != (uint8_t)(i + (int)j + k))
                return false;
    }
    return true;
}

/* A reader of `endpoint`, created before anything binds it; then a
 * publisher of `type` binds it and sends `count` messages. */
static void
s_stream(void *ctx, const char *endpoint, int type, int count, const char *what)
{
    kb_zmtp_sub_t *s = kb_zmtp_sub_new(endpoint, 64 << 20, 64, 10);
    ok(s != NULL, "%s: the reader takes %s", what, endpoint);
    if (!s)
        return;
    kb_frame_t f[KB_FRAMES_MAX];
    size_t n;
    ok(s_wait(s, f, &n, 100) == KB_ZMTP_SUB_NONE && !kb_zmtp_sub_open(s),
       "%s: nothing is there before the publisher binds", what);
    void *pub = zmq_socket(ctx, type);
    int hwm = 0, v6 = 1, linger = 0;
    zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(pub, ZMQ_IPV6, &v6, sizeof v6);
    ok(zmq_bind(pub, endpoint) == 0, "%s: the publisher binds later", what);
    ok(s_joined(pub, s) && kb_zmtp_sub_open(s),
       "%s: the reader connects, subscribes and receives", what);
    uint8_t *scratch = malloc((size_t)1 << 20);
    int good = 0, sent = 0;
    /* Publish in bursts and read between them: a PUB with no send
     * high-water mark still needs the socket to drain. */
    for (int i = 0; i < count; i++) {
        s_publish(pub, i, scratch);
        sent++;
        if (sent % 100 == 0 || i + 1 == count)
            while (good < sent) {
                if (s_next_real(s, f, &n) != KB_ZMTP_SUB_MSG ||
                    !s_matches(good, f, n))
                    break;
                good++;
            }
    }
    is_int(good, count,
           "%s: %d multipart messages (0 B to 1 MiB frames) arrive whole "
           "and in order",
           what, count);
    free(scratch);
    zmq_close(pub);
    kb_zmtp_sub_destroy(&s);
}

static void
test_cap_and_reconnect(void *ctx)
{
    const char *ep = "ipc:///tmp/kb-zmtp-sub-cap";
    kb_zmtp_sub_t *s = kb_zmtp_sub_new(ep, 1000, 64, 10);
    void *pub = zmq_socket(ctx, ZMQ_PUB);
    int linger = 0;
    zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_bind(pub, ep);
    ok(s_joined(pub, s), "cap: joined");
    static char big[5000];
    zmq_send(pub, "head", 4, ZMQ_SNDMORE);
    zmq_send(pub, big, sizeof big, ZMQ_SNDMORE);
    zmq_send(pub, "tail", 4, 0);
    zmq_send(pub, "after", 5, 0);
    kb_frame_t f[KB_FRAMES_MAX];
    size_t n;
    ok(s_next_real(s, f, &n) == KB_ZMTP_SUB_DROPPED,
       "a message over the reader's byte cap is dropped");
    ok(s_next_real(s, f, &n) == KB_ZMTP_SUB_MSG && n == 1 && f[0].len == 5 &&
           !memcmp(f[0].data, "after", 5),
       "the message after it arrives");

    /* The publisher goes away (a kernel restart) and comes back. */
    zmq_close(pub);
    ok(s_wait(s, f, &n, 200) == KB_ZMTP_SUB_NONE,
       "nothing arrives while the publisher is gone");
    pub = zmq_socket(ctx, ZMQ_XPUB);
    zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
    ok(zmq_bind(pub, ep) == 0, "a new publisher binds the same endpoint");
    char sub[8];
    int got = 0;
    for (int i = 0; i < 200 && got <= 0; i++) {
        zmq_pollitem_t it = {pub, 0, ZMQ_POLLIN, 0};
        s_wait(s, f, &n, 10);
        if (zmq_poll(&it, 1, 0) > 0)
            got = zmq_recv(pub, sub, sizeof sub, 0);
    }
    ok(got == 1 && sub[0] == 1,
       "the reader reconnects and subscribes again (the XPUB sees 0x01)");
    ok(s_joined(pub, s), "and receives from the new publisher");
    zmq_close(pub);
    kb_zmtp_sub_destroy(&s);
}

static void
test_endpoints(void)
{
    const char *theirs[] = {"inproc://x",        "tcp://localhost:5555",
                            "tcp://127.0.0.1:0", "tcp://127.0.0.1",
                            "udp://127.0.0.1:5", "ipc://"};
    for (size_t i = 0; i < sizeof theirs / sizeof *theirs; i++) {
        kb_zmtp_sub_t *s = kb_zmtp_sub_new(theirs[i], 1000, 64, 10);
        ok(s == NULL, "%s is left to libzmq", theirs[i]);
        kb_zmtp_sub_destroy(&s);
    }
}

static bool
s_has_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                             .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok6 = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok6;
}

int
main(void)
{
    void *ctx = zmq_ctx_new();
    char ep[64];
    snprintf(ep, sizeof ep, "ipc:///tmp/kb-zmtp-sub-%d", (int)getpid());
    s_stream(ctx, ep, ZMQ_PUB, 2000, "ipc, PUB");
    snprintf(ep, sizeof ep, "ipc:///tmp/kb-zmtp-sub-x%d", (int)getpid());
    s_stream(ctx, ep, ZMQ_XPUB, 500, "ipc, XPUB");
    int port = 20000 + getpid() % 20000;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    s_stream(ctx, ep, ZMQ_PUB, 500, "tcp, IPv4");
    snprintf(ep, sizeof ep, "tcp://[::1]:%d", port + 1);
    if (s_has_ipv6_loopback())
        s_stream(ctx, ep, ZMQ_PUB, 200, "tcp, IPv6");
    else
        skip("no IPv6 loopback on this machine");
    test_cap_and_reconnect(ctx);
    test_endpoints();
    zmq_ctx_term(ctx);
    return done_testing();
}
