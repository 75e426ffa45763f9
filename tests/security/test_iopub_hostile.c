/*
 * A hostile iopub peer against our own ZMTP 3.0 reader (kb_zmtp_sub).
 *
 * Why: the kernel runs untrusted code, and that code can read its
 * connection file and serve any bytes at all on the iopub endpoint the
 * agent connects to (it owns the kernel's PUB socket, or binds the path
 * once the kernel is gone). The reader runs on the agent's own thread, so
 * whatever it does with those bytes the agent does: it must never block,
 * spin, buffer without bound, hand over a message past its caps, or stop
 * reconnecting. This test is that peer: a raw AF_UNIX listener under /tmp
 * written with plain send()/recv() on the test's own thread (so every step
 * is deterministic, and a reader call that blocked would deadlock the test
 * into its alarm), except one forked flooder that must run concurrently.
 *
 * What is attacked, and why it holds:
 *  1. Junk for a greeting (an HTTP request, a ZMTP 2.0 peer, a CURVE
 *     greeting): the signature, version and mechanism are checked as their
 *     bytes arrive, so the reader hangs up, and reconnects only after
 *     reconnect_ms (counted: no reconnect storm, no CPU spent in a loop).
 *  2. First the handshake order: the reader's 91 bytes of greeting and
 *     READY come first, its subscription only after the peer's READY.
 *     Then a frame announcing 2^40 bytes, and 256 MiB of it (bytes that
 *     read as valid small messages if the reader lost count): the decoder
 *     drops the message at its header and skips what follows as it
 *     arrives, so it is DROPPED once and memory does not grow; a frame
 *     over max_bytes that does end is skipped exactly, and the next
 *     message arrives.
 *  3. The byte cap is on all frames together: == max_bytes arrives whole,
 *     one byte more is dropped (at the frame header that passes it).
 *  4. The frame cap: 64 frames arrive, 65 are dropped, as are 100000 empty
 *     frames; commands between messages (10000 PINGs, one of 1 MiB) are
 *     skipped; the stream stays in step.
 *  5. A peer that sends one byte every 2 ms: the socket is non-blocking and
 *     every call returns at once; the message is reassembled whole.
 *  6. A peer that sends a message and closes (also with a reset): what was
 *     received is delivered, then the reader reconnects after its pause.
 *  7. Protocol breaks after the handshake (reserved flag bits, a command
 *     inside a message or one marked continued): the reader disconnects
 *     for that reason and reconnects; a message complete before the break
 *     was delivered, nothing after it is.
 *  8. A peer that never reads and never sends (or stops after the
 *     handshake): the reader's calls stay non-blocking and idle.
 *  9. A forked peer that streams a 2^40-byte frame as fast as it can: no
 *     one call into the reader runs on while the bytes keep coming (the
 *     agent's thread must get back to its deadlines and interrupts). This
 *     is measured, not built in: kb_zmtp_sub_next reads until the socket
 *     is empty, and holds because skipping drains faster than one peer
 *     can fill (slowest call a few ms here, against a 200 ms bound).
 * A peer that hangs the reader trips an alarm: that is a failure.
 */
#include "../tap.h"
#include "../tools/zmtp_wire.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "kernel-bridge/transport/kb_zmtp_sub.h"
#include "kernel-bridge/wire/kb_frames.h"
#include "kernel-bridge/wire/kb_zmtp.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define HANG_SECONDS 60
#define MAX_EVENTS 32
/* A call into the reader that takes longer than this spun. (One that
 * blocked would never return: the peer runs on this same thread, so a
 * blocking read or write is a deadlock and trips the alarm.) Calls take
 * well under 1 ms; the margin is for a shared, loaded machine. */
#define CALL_MAX_US 50000
#define MIB ((size_t)1 << 20)

/* What the reader yielded, in order. */
typedef struct event {
    kb_zmtp_next_t kind;
    size_t n;
    size_t len[KB_FRAMES_MAX];
    uint8_t *bytes; /* the frames, concatenated (owned) */
} event_t;

/* One listener, the reader connected to it, and what the reader did. */
typedef struct peer {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int lfd;                  /* the listener */
    int conn;                 /* the newest accepted connection, or -1 */
    int accepts;              /* connections accepted */
    int closed_by_reader;     /* earlier connections the reader closed */
    int64_t accept_ms;        /* when the newest one was accepted */
    const uint8_t *on_accept; /* written to every new connection */
    size_t on_accept_len;
    kb_zmtp_sub_t *s;
    event_t ev[MAX_EVENTS];
    int nev, msgs, drops;
    int64_t slowest_us; /* the longest single call into the reader */
} peer_t;

/* A greeting as libzmq 4.3 sends it: signature, version 3.1, "NULL" padded
 * to 20 bytes, as-server 0 (NULL has no server role), zero filler to 64
 * bytes. Then its READY. */
static const uint8_t s_greeting[64] = {0xFF, 0,    0, 0, 0,   0,   0,   0,
                                       1,    0x7F, 3, 1, 'N', 'U', 'L', 'L'};
static const uint8_t s_ready[27] = {
    0x04, 25,  5,   'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e',
    't',  '-', 'T', 'y', 'p', 'e', 0,   0,   0,  3,   'P', 'U', 'B'};

static pid_t s_child = -1; /* the forked flooder, killed on a hang */
static char s_why[256];    /* the reader's last log line */

static void
s_hung(int sig)
{
    (void)sig;
    static const char msg[] = "not ok - hung: the reader did not return "
                              "within 60 s of a hostile peer\n";
    if (s_child > 0)
        kill(s_child, SIGKILL);
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(2);
    _exit(1);
}

static void
s_sink(enum log_level level, const char *line, void *arg)
{
    (void)level;
    (void)arg;
    snprintf(s_why, sizeof s_why, "%s", line);
}

/* Peak RSS of this process in KiB. */
static long
s_peak_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* CPU time (user + system) of this process in ms. */
static int64_t
s_cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* A message of string frames, e.g. s_msg(b, 2, "a", "b"). */
static void
s_msg(buf_t *b, int nf, ...)
{
    va_list ap;
    va_start(ap, nf);
    for (int i = 0; i < nf; i++) {
        const char *f = va_arg(ap, const char *);
        zmtp_frame(b, i + 1 < nf ? 0x01 : 0x00, f, strlen(f));
    }
    va_end(ap);
}

static void
s_record(peer_t *p, kb_zmtp_next_t kind, const kb_frame_t *f, size_t n)
{
    if (kind == KB_ZMTP_SUB_MSG)
        p->msgs++;
    else
        p->drops++;
    if (p->nev == MAX_EVENTS)
        return;
    event_t *e = &p->ev[p->nev++];
    e->kind = kind;
    e->n = n;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += f[i].len;
    e->bytes = malloc(total ? total : 1);
    total = 0;
    for (size_t i = 0; i < n; i++) {
        e->len[i] = f[i].len;
        memcpy(e->bytes + total, f[i].data, f[i].len);
        total += f[i].len;
    }
}

/* Event i is a message of exactly these string frames. */
static bool
s_is_msg(const peer_t *p, int i, int nf, ...)
{
    if (i >= p->nev || p->ev[i].kind != KB_ZMTP_SUB_MSG ||
        p->ev[i].n != (size_t)nf)
        return false;
    va_list ap;
    va_start(ap, nf);
    bool same = true;
    size_t at = 0;
    for (int j = 0; j < nf; j++) {
        const char *f = va_arg(ap, const char *);
        size_t len = strlen(f);
        if (p->ev[i].len[j] != len || memcmp(p->ev[i].bytes + at, f, len))
            same = false;
        at += p->ev[i].len[j];
    }
    va_end(ap);
    return same;
}

static bool
s_is_drop(const peer_t *p, int i)
{
    return i < p->nev && p->ev[i].kind == KB_ZMTP_SUB_DROPPED;
}

/* True when the peer side of `fd` reads end-of-stream: the reader hung up
 * (anything it had sent before is read and discarded). */
static bool
s_closed(int fd)
{
    uint8_t b[4096];
    for (;;) {
        ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (r > 0)
            continue;
        return r == 0 || (errno != EAGAIN && errno != EINTR);
    }
}

static void
s_accept(peer_t *p)
{
    int fd;
    while ((fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
           0) {
        if (p->conn >= 0) {
            if (s_closed(p->conn))
                p->closed_by_reader++;
            close(p->conn);
        }
        p->conn = fd;
        p->accepts++;
        p->accept_ms = clock_mono_ms();
        if (p->on_accept && send(fd, p->on_accept, p->on_accept_len,
                                 MSG_NOSIGNAL) != (ssize_t)p->on_accept_len)
            diag("could not write to a new connection: %s", strerror(errno));
    }
}

/* One round, as an event loop would do it: take every message the reader
 * has, then poll its fd (and the listener) up to `ms` and tell it what
 * happened. Every call into the reader is timed. */
static void
s_pump(peer_t *p, int ms)
{
    s_accept(p);
    for (;;) {
        kb_frame_t f[KB_FRAMES_MAX];
        size_t n = 0;
        int64_t t0 = clock_mono_us();
        kb_zmtp_next_t r = kb_zmtp_sub_next(p->s, f, &n);
        int64_t dt = clock_mono_us() - t0;
        if (dt > p->slowest_us)
            p->slowest_us = dt;
        if (r == KB_ZMTP_SUB_NONE)
            break;
        s_record(p, r, f, n);
    }
    int fd, to = ms;
    short ev;
    int64_t t0 = clock_mono_us();
    bool more = kb_zmtp_sub_poll_setup(p->s, true, &fd, &ev, &to);
    int64_t dt = clock_mono_us() - t0;
    if (dt > p->slowest_us)
        p->slowest_us = dt;
    if (more)
        return;
    struct pollfd pf[2] = {{fd, ev, 0}, {p->lfd, POLLIN, 0}};
    int rc = poll(pf, 2, to);
    t0 = clock_mono_us();
    kb_zmtp_sub_poll_done(p->s, rc > 0 ? pf[0].revents : 0);
    dt = clock_mono_us() - t0;
    if (dt > p->slowest_us)
        p->slowest_us = dt;
    s_accept(p);
}

static void
s_pump_for(peer_t *p, int ms)
{
    int64_t until = clock_mono_ms() + ms;
    for (int64_t now; (now = clock_mono_ms()) < until;)
        s_pump(p, (int)(until - now < 5 ? until - now : 5));
}

/* Pump until the reader yielded `count` events in all, or `ms` pass. */
static bool
s_wait_events(peer_t *p, int count, int ms)
{
    int64_t until = clock_mono_ms() + ms;
    while (p->msgs + p->drops < count && clock_mono_ms() < until)
        s_pump(p, 5);
    return p->msgs + p->drops >= count;
}

/* Pump until `count` connections were accepted in all, or `ms` pass. */
static bool
s_wait_accepts(peer_t *p, int count, int ms)
{
    int64_t until = clock_mono_ms() + ms;
    while (p->accepts < count && clock_mono_ms() < until)
        s_pump(p, 5);
    return p->accepts >= count;
}

/* Read exactly `want` bytes the reader sent on the newest connection,
 * pumping meanwhile; how many arrived within `ms`. */
static size_t
s_read(peer_t *p, uint8_t *b, size_t want, int ms)
{
    size_t got = 0;
    int64_t until = clock_mono_ms() + ms;
    while (got < want) {
        ssize_t r = recv(p->conn, b + got, want - got, MSG_DONTWAIT);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0 || clock_mono_ms() >= until)
            break;
        else
            s_pump(p, 2);
    }
    return got;
}

/* Write all of data[0..len) on the newest connection while the reader
 * takes it in. False when the reader hung up or it took over 20 s. */
static bool
s_send(peer_t *p, const void *data, size_t len)
{
    const uint8_t *d = data;
    int64_t until = clock_mono_ms() + 20000;
    int stalls = 0;
    while (len) {
        ssize_t w = send(p->conn, d, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            d += w;
            len -= (size_t)w;
            stalls = 0;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (clock_mono_ms() > until)
            return false;
        /* The reader drains the socket in one round; wait only when a
         * round did not make room. */
        s_pump(p, stalls++ ? 1 : 0);
    }
    return true;
}

static bool
s_send_buf(peer_t *p, const buf_t *b)
{
    return s_send(p, b->data, b->len);
}

static bool
s_open(peer_t *p, const char *tag, size_t max_bytes, int reconnect_ms)
{
    memset(p, 0, sizeof *p);
    p->conn = -1;
    snprintf(p->path, sizeof p->path, "/tmp/kb-iopub-hostile-%d-%s",
             (int)getpid(), tag);
    unlink(p->path);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    memcpy(un.sun_path, p->path, sizeof un.sun_path);
    p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&un, sizeof un) < 0 ||
        listen(p->lfd, 16) < 0) {
        diag("listen on %s: %s", p->path, strerror(errno));
        return false;
    }
    char ep[sizeof p->path + 8];
    snprintf(ep, sizeof ep, "ipc://%s", p->path);
    p->s = kb_zmtp_sub_new(ep, max_bytes, KB_FRAMES_MAX, reconnect_ms);
    return p->s != NULL;
}

static void
s_close(peer_t *p)
{
    kb_zmtp_sub_destroy(&p->s);
    if (p->conn >= 0)
        close(p->conn);
    if (p->lfd >= 0)
        close(p->lfd);
    unlink(p->path);
    for (int i = 0; i < p->nev; i++)
        free(p->ev[i].bytes);
}

/* Accept the reader, read its hello, greet it; true once its
 * subscription arrived. */
static bool
s_handshake(peer_t *p)
{
    uint8_t b[KB_ZMTP_HELLO_LEN];
    if (!s_wait_accepts(p, p->accepts + 1, 2000) ||
        s_read(p, b, sizeof b, 2000) != sizeof b ||
        memcmp(b, kb_zmtp_hello(), sizeof b) ||
        !s_send(p, s_greeting, sizeof s_greeting) ||
        !s_send(p, s_ready, sizeof s_ready) ||
        s_read(p, b, KB_ZMTP_SUBSCRIBE_LEN, 2000) != KB_ZMTP_SUBSCRIBE_LEN)
        return false;
    return !memcmp(b, "\x00\x01\x01", 3);
}

/* 1. Junk for a greeting. */
static void
test_junk_greetings(void)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    /* ZMTP 2.0 (libzmq 3.x): the signature, revision 1, socket type PUB,
     * an empty identity; then it waits for our part. */
    static const uint8_t zmtp2[] = {0xFF, 0, 0,    0, 0, 0, 0,
                                    0,    1, 0x7F, 1, 1, 0, 0};
    uint8_t curve[64];
    memcpy(curve, s_greeting, sizeof curve);
    memcpy(curve + 12, "CURVE", 5);
    const struct {
        const char *what;
        const uint8_t *bytes;
        size_t len;
    } junk[] = {
        {"an HTTP request", (const uint8_t *)http, sizeof http - 1},
        {"a ZMTP 2.0 greeting", zmtp2, sizeof zmtp2},
        {"a CURVE greeting", curve, sizeof curve},
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        peer_t p;
        if (!ok(s_open(&p, "junk", MIB, 50), "%s: a reader", junk[i].what))
            continue;
        p.on_accept = junk[i].bytes;
        p.on_accept_len = junk[i].len;
        s_why[0] = '\0';
        int64_t cpu = s_cpu_ms();
        s_pump_for(&p, 500);
        cpu = s_cpu_ms() - cpu;
        ok(p.msgs == 0 && p.drops == 0 && !kb_zmtp_sub_open(p.s),
           "%s for a greeting: no message, no handshake", junk[i].what);
        ok(p.closed_by_reader >= 1, "%s: the reader hangs up (%s)",
           junk[i].what, s_why);
        ok(p.accepts >= 2 && p.accepts <= 15,
           "%s: and reconnects at its pace: %d connections in 500 ms at "
           "50 ms apart (2 to 15)",
           junk[i].what, p.accepts);
        ok(cpu < 150 && p.slowest_us < CALL_MAX_US,
           "%s: no busy loop (%lld ms CPU in 500 ms; slowest call %lld us)",
           junk[i].what, (long long)cpu, (long long)p.slowest_us);
        s_close(&p);
    }
}

/* A stream of 5-byte valid messages ("\0\3abc"...), as junk: if the reader
 * lost its place in a frame it skips, it would yield them. */
static uint8_t *s_pattern;
#define PATTERN_LEN (MIB + 8)

static bool
s_stream_pattern(peer_t *p, size_t total)
{
    for (size_t off = 0; off < total;) {
        size_t k = total - off < MIB ? total - off : MIB;
        if (!s_send(p, s_pattern + off % 5, k))
            return false;
        off += k;
    }
    return true;
}

/* 2. A frame of 2^40 bytes, and one just past max_bytes that ends. */
static void
test_huge_frames(void)
{
    peer_t p;
    if (!ok(s_open(&p, "huge", MIB, 50), "huge: a reader"))
        return;
    uint8_t b[KB_ZMTP_HELLO_LEN];
    ok(s_wait_accepts(&p, 1, 2000) &&
           s_read(&p, b, sizeof b, 2000) == sizeof b &&
           !memcmp(b, kb_zmtp_hello(), sizeof b),
       "the reader connects and sends its greeting and READY (91 bytes)");
    s_send(&p, s_greeting, sizeof s_greeting);
    s_pump_for(&p, 50);
    ok(s_read(&p, b, 1, 0) == 0 && !kb_zmtp_sub_open(p.s),
       "no subscription while our READY is not sent");
    s_send(&p, s_ready, sizeof s_ready);
    ok(s_read(&p, b, 3, 2000) == 3 && !memcmp(b, "\x00\x01\x01", 3) &&
           kb_zmtp_sub_open(p.s),
       "the subscription (00 01 01) arrives once it is");

    long base = s_peak_kib();
    int64_t t0 = clock_mono_ms();
    static const uint8_t tib[9] = {0x02, 0, 0, 1, 0, 0, 0, 0, 0};
    bool sent = s_send(&p, tib, sizeof tib) && s_stream_pattern(&p, 256 * MIB);
    s_pump_for(&p, 20);
    long grew = (s_peak_kib() - base) / 1024;
    ok(sent, "256 MiB of a 2^40-byte frame are taken in (%lld ms)",
       (long long)(clock_mono_ms() - t0));
    ok(p.drops == 1 && p.msgs == 0 && kb_zmtp_sub_open(p.s),
       "the message is DROPPED once at its header, never delivered, and "
       "the rest skipped as it arrives (%d drops, %d messages)",
       p.drops, p.msgs);
    /* Nothing of the frame is kept: the bound holds under ASan too (its
     * quarantine never sees the reader's buffer grow or move). */
    ok(grew < 32, "peak RSS grew by %ld MiB (under 32 MiB)", grew);
    ok(p.slowest_us < 200000,
       "each call returns while the stream goes on (slowest %lld us)",
       (long long)p.slowest_us);
    s_close(&p);

    /* An 8 MiB frame against 1 MiB, whole, then a valid message. */
    if (!ok(s_open(&p, "over", MIB, 50), "over: a reader"))
        return;
    ok(s_handshake(&p), "over: the handshake");
    uint8_t h[9] = {0x03};
    for (int i = 0; i < 8; i++)
        h[1 + i] = (uint8_t)((uint64_t)(8 * MIB) >> (56 - 8 * i));
    buf_t after;
    buf_init(&after, 0);
    zmtp_frame(&after, 0x00, "", 0); /* the last frame of the dropped one */
    s_msg(&after, 2, "after", "the flood");
    ok(s_send(&p, h, sizeof h) && s_stream_pattern(&p, 8 * MIB) &&
           s_send_buf(&p, &after) && s_wait_events(&p, 2, 2000),
       "over: a 2-frame message of 8 MiB is sent whole, then another");
    s_pump_for(&p, 20);
    ok(p.nev == 2 && s_is_drop(&p, 0) &&
           s_is_msg(&p, 1, 2, "after", "the flood"),
       "over: it is DROPPED, then the next message arrives exact");
    buf_release(&after);
    s_close(&p);
}

/* Frame j of a test message: byte k is (seed + j + k). */
static void
s_fill(uint8_t *d, size_t len, int seed)
{
    for (size_t k = 0; k < len; k++)
        d[k] = (uint8_t)(seed + k);
}

/* 3. The byte cap counts every frame of a message. */
static void
test_byte_cap(void)
{
    const size_t cap = 100000;
    peer_t p;
    if (!ok(s_open(&p, "cap", cap, 50), "cap: a reader"))
        return;
    ok(s_handshake(&p), "cap: the handshake");
    uint8_t *body = malloc(cap + 1);
    buf_t m;
    buf_init(&m, 0);
    size_t lens[2][3] = {{10, cap - 20, 10}, {10, cap - 19, 10}};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            s_fill(body, lens[i][j], j);
            zmtp_frame(&m, j < 2 ? 0x01 : 0x00, body, lens[i][j]);
        }
    s_msg(&m, 1, "ok");
    ok(s_send_buf(&p, &m) && s_wait_events(&p, 3, 2000),
       "cap: three messages are sent");
    s_pump_for(&p, 20);
    bool whole =
        p.nev >= 1 && p.ev[0].kind == KB_ZMTP_SUB_MSG && p.ev[0].n == 3;
    for (size_t j = 0, at = 0; whole && j < 3; at += lens[0][j++]) {
        s_fill(body, lens[0][j], (int)j);
        whole = p.ev[0].len[j] == lens[0][j] &&
                !memcmp(p.ev[0].bytes + at, body, lens[0][j]);
    }
    ok(whole, "a message of 3 frames and exactly max_bytes arrives whole");
    ok(s_is_drop(&p, 1), "one byte more is dropped");
    ok(p.nev == 3 && s_is_msg(&p, 2, 1, "ok"), "and the next one arrives");
    buf_release(&m);
    free(body);
    s_close(&p);
}

/* 4. The frame cap (64). */
static void
test_frame_cap(void)
{
    peer_t p;
    if (!ok(s_open(&p, "frames", MIB, 50), "frames: a reader"))
        return;
    ok(s_handshake(&p), "frames: the handshake");
    buf_t m;
    buf_init(&m, 0);
    const int counts[3] = {64, 65, 100000};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < counts[i]; j++) {
            uint8_t one = (uint8_t)j;
            zmtp_frame(&m, j + 1 < counts[i] ? 0x01 : 0x00, &one,
                       i == 2 ? 0 : 1);
        }
    /* Commands between messages are skipped, a long one unbuffered. */
    for (int i = 0; i < 10000; i++)
        zmtp_frame(&m, 0x04, "\x04PING", 5);
    uint8_t *cmd = calloc(1, MIB);
    zmtp_frame(&m, 0x04, cmd, MIB);
    free(cmd);
    s_msg(&m, 2, "next", "message");
    ok(s_send_buf(&p, &m) && s_wait_events(&p, 4, 2000),
       "frames: four messages are sent, then 10000 PINGs and a 1 MiB "
       "command");
    s_pump_for(&p, 20);
    bool all = p.nev >= 1 && p.ev[0].kind == KB_ZMTP_SUB_MSG && p.ev[0].n == 64;
    for (size_t j = 0; all && j < 64; j++)
        all = p.ev[0].len[j] == 1 && p.ev[0].bytes[j] == j;
    ok(all, "a message of 64 frames (the cap) arrives whole");
    ok(s_is_drop(&p, 1), "one of 65 frames is DROPPED");
    ok(s_is_drop(&p, 2), "one of 100000 empty frames is DROPPED");
    ok(p.nev == 4 && s_is_msg(&p, 3, 2, "next", "message"),
       "and the message after the commands is fine");
    buf_release(&m);
    s_close(&p);
}

/* 5. One byte every 2 ms, from the greeting on. */
static void
test_slow_peer(void)
{
    peer_t p;
    if (!ok(s_open(&p, "slow", MIB, 50), "slow: a reader"))
        return;
    buf_t m;
    buf_init(&m, 0);
    buf_append(&m, s_greeting, sizeof s_greeting);
    buf_append(&m, s_ready, sizeof s_ready);
    s_msg(&m, 3, "slow", "but", "whole");
    ok(s_wait_accepts(&p, 1, 2000), "slow: the reader connects");
    bool early = false;
    int64_t t0 = clock_mono_ms();
    for (size_t i = 0; i < m.len; i++) {
        s_send(&p, m.data + i, 1);
        s_pump_for(&p, 2);
        if (i + 1 < m.len && p.nev)
            early = true;
    }
    s_wait_events(&p, 1, 1000);
    s_pump_for(&p, 20);
    ok(!early && p.nev == 1 && s_is_msg(&p, 0, 3, "slow", "but", "whole"),
       "%zu bytes over %lld ms: the message arrives whole, once, after its "
       "last byte",
       m.len, (long long)(clock_mono_ms() - t0));
    ok(p.slowest_us < CALL_MAX_US,
       "every call into the reader returned at once (slowest %lld us)",
       (long long)p.slowest_us);
    buf_release(&m);
    s_close(&p);
}

/* 6. A message, then the peer closes (cleanly, then with a reset). */
static void
test_close_after_message(void)
{
    for (int reset = 0; reset < 2; reset++) {
        const char *how = reset ? "reset" : "close";
        peer_t p;
        if (!ok(s_open(&p, how, MIB, 100), "%s: a reader", how))
            continue;
        buf_t m;
        buf_init(&m, 0);
        if (reset) {
            /* Never read what the reader sends: closing with its bytes
             * unread makes its next read fail with ECONNRESET. */
            ok(s_wait_accepts(&p, 1, 2000), "reset: the reader connects");
            buf_append(&m, s_greeting, sizeof s_greeting);
            buf_append(&m, s_ready, sizeof s_ready);
            s_send_buf(&p, &m);
            int64_t until = clock_mono_ms() + 2000;
            while (!kb_zmtp_sub_open(p.s) && clock_mono_ms() < until)
                s_pump(&p, 5);
            ok(kb_zmtp_sub_open(p.s), "reset: the handshake (unread)");
            buf_reset(&m);
        } else {
            ok(s_handshake(&p), "close: the handshake");
        }
        s_msg(&m, 2, "last", "words");
        bool sent = s_send_buf(&p, &m);
        close(p.conn);
        p.conn = -1;
        int64_t closed = clock_mono_ms();
        ok(sent && s_wait_events(&p, 1, 2000) &&
               s_is_msg(&p, 0, 2, "last", "words"),
           "%s: the message sent before it arrives", how);
        ok(s_wait_accepts(&p, 2, 2000) && p.msgs + p.drops == 1,
           "%s: then the reader reconnects", how);
        ok(p.accept_ms - closed >= 99,
           "%s: no sooner than its 100 ms pause (%lld ms)", how,
           (long long)(p.accept_ms - closed));
        uint8_t b[KB_ZMTP_HELLO_LEN];
        ok(s_read(&p, b, sizeof b, 2000) == sizeof b &&
               !memcmp(b, kb_zmtp_hello(), sizeof b),
           "%s: and greets the new connection", how);
        buf_release(&m);
        s_close(&p);
    }
}

/* 7. Protocol breaks after the handshake. */
static void
test_breaks(void)
{
    const struct {
        const char *what, *why;
        const char *bytes;
        size_t len;
    } breaks[] = {
        {"reserved flag bit 0x10", "reserved flag bits", "\x10\x01x", 3},
        {"reserved flag bit 0x80", "reserved flag bits", "\x80\x01x", 3},
        {"a command inside a message", "a command inside a message",
         "\x01\x05part1\x04\x05\x04PING", 14},
        {"a command marked continued", "command frame marked as continued",
         "\x05\x05\x04PING", 7},
    };
    for (size_t i = 0; i < sizeof breaks / sizeof breaks[0]; i++) {
        const char *what = breaks[i].what;
        peer_t p;
        if (!ok(s_open(&p, "break", MIB, 50), "%s: a reader", what))
            continue;
        ok(s_handshake(&p), "%s: the handshake", what);
        buf_t m;
        buf_init(&m, 0);
        s_msg(&m, 2, "before", "the break");
        buf_append(&m, breaks[i].bytes, breaks[i].len);
        s_msg(&m, 1, "after the break");
        s_why[0] = '\0';
        ok(s_send_buf(&p, &m) && s_wait_accepts(&p, 2, 2000),
           "%s: the reader reconnects", what);
        ok(p.closed_by_reader == 1 && strstr(s_why, breaks[i].why),
           "%s: having hung up for it (%s)", what, s_why);
        ok(p.nev == 1 && s_is_msg(&p, 0, 2, "before", "the break"),
           "%s: the message before it was delivered, nothing after", what);
        buf_reset(&m);
        buf_append(&m, s_greeting, sizeof s_greeting);
        buf_append(&m, s_ready, sizeof s_ready);
        s_msg(&m, 1, "again");
        ok(s_send_buf(&p, &m) && s_wait_events(&p, 2, 2000) &&
               s_is_msg(&p, 1, 1, "again"),
           "%s: the new connection works", what);
        buf_release(&m);
        s_close(&p);
    }
}

/* 8. A peer that never reads, and sends nothing or just the handshake. */
static void
test_silent_peer(void)
{
    for (int greet = 0; greet < 2; greet++) {
        const char *what = greet ? "handshake only" : "silent";
        peer_t p;
        if (!ok(s_open(&p, what[0] == 's' ? "silent" : "greet", MIB, 50),
                "%s: a reader", what))
            continue;
        if (greet) {
            uint8_t hs[sizeof s_greeting + sizeof s_ready];
            memcpy(hs, s_greeting, sizeof s_greeting);
            memcpy(hs + sizeof s_greeting, s_ready, sizeof s_ready);
            p.on_accept = hs;
            p.on_accept_len = sizeof hs;
            s_wait_accepts(&p, 1, 2000);
            p.on_accept = NULL;
        }
        int64_t cpu = s_cpu_ms();
        s_pump_for(&p, 300);
        cpu = s_cpu_ms() - cpu;
        ok(p.accepts == 1 && p.nev == 0 &&
               kb_zmtp_sub_open(p.s) == (greet == 1),
           "%s peer that never reads: one connection, kept, nothing "
           "yielded",
           what);
        ok(p.slowest_us < CALL_MAX_US && cpu < 100,
           "%s: the reader's calls stay non-blocking and idle (slowest "
           "%lld us, %lld ms CPU in 300 ms)",
           what, (long long)p.slowest_us, (long long)cpu);
        s_close(&p);
    }
}

/* 9. A forked peer streams a 2^40-byte frame as fast as it can. */
static void
test_flood(void)
{
    peer_t p;
    if (!ok(s_open(&p, "flood", MIB, 50), "flood: a reader"))
        return;
    s_child = fork();
    if (s_child == 0) { /* the peer: handshake, then 2 s of the frame */
        signal(SIGALRM, SIG_DFL);
        alarm(10);
        struct pollfd pf = {p.lfd, POLLIN, 0};
        poll(&pf, 1, 2000);
        int fd = accept(p.lfd, NULL, NULL);
        uint8_t b[KB_ZMTP_HELLO_LEN];
        if (fd < 0 || recv(fd, b, sizeof b, MSG_WAITALL) != sizeof b)
            _exit(1);
        static const uint8_t tib[9] = {0x02, 0, 0, 1, 0, 0, 0, 0, 0};
        send(fd, s_greeting, sizeof s_greeting, MSG_NOSIGNAL);
        send(fd, s_ready, sizeof s_ready, MSG_NOSIGNAL);
        send(fd, tib, sizeof tib, MSG_NOSIGNAL);
        int64_t until = clock_mono_ms() + 2000;
        while (clock_mono_ms() < until)
            if (send(fd, s_pattern, MIB, MSG_NOSIGNAL) < 0)
                _exit(1);
        _exit(0);
    }
    /* The child alone accepts: once it is gone the reader is refused. */
    close(p.lfd);
    p.lfd = -1;
    int64_t t0 = clock_mono_ms();
    s_pump_for(&p, 2500);
    int status = 0;
    waitpid(s_child, &status, 0);
    s_child = -1;
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && p.drops == 1 &&
           p.msgs == 0,
       "flood: 2 s of a 2^40-byte frame at full speed is DROPPED once");
    ok(p.slowest_us < 200000,
       "flood: no call into the reader runs on while the bytes keep "
       "coming (slowest %lld us over %lld ms)",
       (long long)p.slowest_us, (long long)(clock_mono_ms() - t0));
    s_close(&p);
}

int
main(void)
{
    signal(SIGALRM, s_hung);
    alarm(HANG_SECONDS);
    signal(SIGPIPE, SIG_IGN);
    log_set_level(LOG_INFO);
    log_set_sink(s_sink, NULL);
    s_pattern = malloc(PATTERN_LEN);
    for (size_t i = 0; i < PATTERN_LEN; i++)
        s_pattern[i] = (uint8_t) "\x00\x03"
                                 "abc"[i % 5];
    int64_t t0 = clock_mono_ms();

    test_huge_frames(); /* first: it measures peak RSS */
    test_junk_greetings();
    test_byte_cap();
    test_frame_cap();
    test_slow_peer();
    test_close_after_message();
    test_breaks();
    test_silent_peer();
    test_flood();

    diag("%lld ms in all", (long long)(clock_mono_ms() - t0));
    free(s_pattern);
    return done_testing();
}
