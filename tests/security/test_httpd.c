/* agent/http's ag_httpd against hostile and crowded clients (issue 24
 * item 4), with small limits so each bound shows in seconds: header and
 * request deadlines, the per-address cap on old incomplete connections
 * (fast clients never count), body caps, the worker queue, streams that
 * never block the event loop and that learn when their client went, and
 * the one-owner rule for requests under many concurrent clients that hang
 * up at any point (run it under ASan: tests/security, make asan). */
#include "agent/http/ag_httpd.h"
#include "common/clock.h"
#include "common/log.h"
#include "tests/tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static atomic_int s_gone_seen;   /* /flood writers told the client went */
static atomic_int s_handled;     /* handler calls */
static atomic_int s_stop_writes; /* /forever writers told the server stops */

static void
s_handle(void *arg, ag_httpd_req_t *req)
{
    (void)arg;
    atomic_fetch_add(&s_handled, 1);
    const char *path = ag_httpd_path(req);
    const char *q = ag_httpd_query(req, "n");
    int n = q ? atoi(q) : 0;
    if (strcmp(path, "/echo") == 0) {
        size_t len;
        const char *body = ag_httpd_body(req, &len);
        ag_httpd_add_header(req, "X-Echo", "1");
        ag_httpd_reply(req, 200, "text/plain", body, len);
    } else if (strcmp(path, "/sleep") == 0) {
        usleep((useconds_t)n * 1000);
        ag_httpd_reply(req, 200, "text/plain", "slept", 5);
    } else if (strcmp(path, "/stream") == 0) {
        ag_httpd_stream_t *st =
            ag_httpd_stream(req, 200, "application/x-ndjson", NULL);
        for (int i = 0; i < n; i++) {
            char line[32];
            int k = snprintf(line, sizeof line, "{\"i\":%d}\n", i);
            if (ag_httpd_stream_write(st, line, (size_t)k) < 0)
                break;
            if (i % 10 == 0)
                usleep(2000);
        }
        ag_httpd_stream_close(&st);
    } else if (strcmp(path, "/flood") == 0 || strcmp(path, "/forever") == 0) {
        /* req and its strings are gone once answered: copy first. */
        bool flood = strcmp(path, "/flood") == 0;
        ag_httpd_stream_t *st =
            ag_httpd_stream(req, 200, "application/octet-stream", NULL);
        static char chunk[65536];
        memset(chunk, 'x', sizeof chunk);
        int64_t end = clock_mono_ms() + 60000;
        while (clock_mono_ms() < end) {
            if (ag_httpd_stream_write(st, chunk, sizeof chunk) < 0) {
                atomic_fetch_add(flood ? &s_gone_seen : &s_stop_writes, 1);
                break;
            }
            if (!flood)
                usleep(50000);
        }
        ag_httpd_stream_close(&st);
    } else {
        ag_httpd_reply(req, 404, "text/plain", "no\n", 3);
    }
}

static ag_httpd_t *
s_start(const ag_httpd_limits_t *l, unsigned *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ag_httpd_opts_t o = {.addr = (struct sockaddr *)&sa,
                         .addrlen = sizeof sa,
                         .handle = s_handle,
                         .name = "test",
                         .limits = *l};
    err_t err = {0};
    ag_httpd_t *d = ag_httpd_start(&o, &err);
    if (!d)
        diag("%s", err.text);
    *port = d ? ag_httpd_port(d) : 0;
    return d;
}

static int
s_connect(unsigned port, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (src) {
        inet_pton(AF_INET, src, &sa.sin_addr);
        bind(fd, (struct sockaddr *)&sa, sizeof sa);
    }
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool
s_send(int fd, const char *data, size_t len)
{
    return fd >= 0 && send(fd, data, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* One HTTP/1.0 request; the status, and the body in out (capped). */
static int
s_request(unsigned port, const char *head, const char *body, char *out,
          size_t outsize)
{
    int fd = s_connect(port, NULL);
    if (fd < 0)
        return -1;
    char req[4096];
    int n = snprintf(req, sizeof req, "%s\r\nContent-Length: %zu\r\n\r\n", head,
                     body ? strlen(body) : 0);
    if (!s_send(fd, req, (size_t)n) ||
        (body && !s_send(fd, body, strlen(body)))) {
        close(fd);
        return -1;
    }
    static _Thread_local char buf[1 << 20];
    size_t have = 0;
    ssize_t k;
    while (have < sizeof buf - 1 &&
           (k = read(fd, buf + have, sizeof buf - 1 - have)) > 0)
        have += (size_t)k;
    buf[have] = '\0';
    close(fd);
    int status = -1;
    sscanf(buf, "HTTP/1.%*d %d", &status);
    if (out) {
        const char *b = strstr(buf, "\r\n\r\n");
        snprintf(out, outsize, "%s", b ? b + 4 : "");
    }
    return status;
}

/* Has the server closed fd (within ms)? */
static bool
s_closed(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* ---- the crowd: the ownership rule under clients that hang up --------- */

static unsigned s_port;

static void *
s_crowd(void *arg)
{
    intptr_t id = (intptr_t)arg;
    int good = 0;
    for (int i = 0; i < 60; i++) {
        char head[128];
        int kind = (int)((id * 7 + i) % 4);
        if (kind == 3) { /* ask, then hang up while the worker sleeps */
            int fd = s_connect(s_port, NULL);
            snprintf(head, sizeof head, "GET /sleep?n=%d HTTP/1.0\r\n\r\n",
                     i % 3);
            if (s_send(fd, head, strlen(head)))
                good++;
            if (fd >= 0)
                close(fd);
            continue;
        }
        if (kind == 2)
            snprintf(head, sizeof head, "GET /stream?n=%d HTTP/1.0", 5 + i);
        else if (kind == 1)
            snprintf(head, sizeof head, "GET /sleep?n=%d HTTP/1.0", i % 3);
        else
            snprintf(head, sizeof head, "POST /echo HTTP/1.0");
        char out[64];
        int st =
            s_request(s_port, head, kind == 0 ? "ping" : NULL, out, sizeof out);
        good += st == 200;
    }
    return (void *)(intptr_t)good;
}

int
main(void)
{
    log_init_from_env();
    ag_httpd_limits_t l;
    ag_httpd_limits_default(&l);
    l.header_ms = 3000;
    l.request_ms = 5000;
    l.stale_ms = 500;
    l.peer_stale = 4;
    l.max_body = 1024;
    l.body_in_flight = 4096;
    l.workers = 8;
    l.queue_max = 512;
    l.stream_buffer = 256 * 1024;
    unsigned port;
    ag_httpd_t *d = s_start(&l, &port);
    ok(d != NULL, "the daemon listens on a free port (%u)", port);
    if (!d)
        return done_testing();
    s_port = port;

    char out[4096];
    int st =
        s_request(port, "POST /echo?n=1 HTTP/1.0", "hello", out, sizeof out);
    ok(st == 200 && strcmp(out, "hello") == 0,
       "a request is answered by "
       "its handler (%d %s)",
       st, out);
    char big[2048];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    is_int(s_request(port, "POST /echo HTTP/1.0", big, NULL, 0), 413,
           "a body past max_body is refused with 413");
    st = s_request(port, "GET /stream?n=300 HTTP/1.0", NULL, out, sizeof out);
    ok(st == 200 && strstr(out, "{\"i\":0}\n{\"i\":1}\n") &&
           strstr(out, "{\"i\":299}\n"),
       "a streamed answer arrives whole (300 lines)");

    /* 16 clients x 60 requests, a quarter of them hanging up early. */
    pthread_t t[16];
    for (intptr_t i = 0; i < 16; i++)
        pthread_create(&t[i], NULL, s_crowd, (void *)i);
    int good = 0;
    for (int i = 0; i < 16; i++) {
        void *r;
        pthread_join(t[i], &r);
        good += (int)(intptr_t)r;
    }
    is_int(good, 16 * 60,
           "960 concurrent requests on 8 workers, a quarter hanging up "
           "early: every other one answered");

    /* A client that stops reading a stream: its writer learns it. */
    int fd = s_connect(port, NULL);
    const char *fl = "GET /flood HTTP/1.0\r\n\r\n";
    ok(s_send(fd, fl, strlen(fl)), "a client asks for a flood");
    char junk[65536];
    ssize_t got = read(fd, junk, sizeof junk);
    close(fd);
    int64_t t0 = clock_mono_ms();
    while (atomic_load(&s_gone_seen) == 0 && clock_mono_ms() - t0 < 20000)
        usleep(50000);
    ok(got > 0 && atomic_load(&s_gone_seen) == 1,
       "... reads a little and hangs up: the writer's next write fails "
       "(within 20 s)");

    /* Deadlines and the per-address cap. */
    int slow = s_connect(port, NULL);
    const char *part = "GET /echo HTTP/1.1\r\nHost: x\r\n";
    (void)s_send(slow, part, strlen(part));
    int silent = s_connect(port, NULL);
    int half[20];
    for (int i = 0; i < 20; i++) {
        half[i] = s_connect(port, "127.0.0.3");
        (void)s_send(half[i], part, strlen(part));
    }
    usleep(200 * 1000);
    int open_young = 0;
    for (int i = 0; i < 20; i++)
        open_young += !s_closed(half[i], 0);
    is_int(open_young, 20,
           "20 incomplete connections younger than stale_ms "
           "stay open");
    /* 100 fast requests from 127.0.0.1 meanwhile. */
    int fast = 0;
    for (int i = 0; i < 100; i++)
        fast += s_request(port, "POST /echo HTTP/1.0", "x", NULL, 0) == 200;
    is_int(fast, 100, "fast clients are served meanwhile");
    usleep(1000 * 1000);
    int open_old = 0, newest_kept = 1;
    for (int i = 0; i < 20; i++) {
        bool c = s_closed(half[i], 0);
        open_old += !c;
        if (!c && i < 16)
            newest_kept = 0;
    }
    ok(open_old <= 4 && newest_kept,
       "once old, at most peer_stale (4) of them stay, the newest (%d open)",
       open_old);
    ok(!s_closed(slow, 0), "a connection from another address, trickling, "
                           "is not cut for them");
    t0 = clock_mono_ms();
    bool slow_cut = false, silent_cut = false;
    while (clock_mono_ms() - t0 < 10000 && !(slow_cut && silent_cut)) {
        if (!slow_cut) {
            (void)s_send(slow, "X", 1);
            slow_cut = s_closed(slow, 0);
        }
        silent_cut = silent_cut || s_closed(silent, 0);
        usleep(200 * 1000);
    }
    ok(slow_cut && silent_cut,
       "trickling and silent connections are cut at the header deadline "
       "(3 s; seen within 10 s)");
    close(slow);
    close(silent);
    for (int i = 0; i < 20; i++)
        close(half[i]);

    /* Stop with a stream running: its writer is told, stop returns. */
    fd = s_connect(port, NULL);
    const char *fe = "GET /forever HTTP/1.0\r\n\r\n";
    (void)s_send(fd, fe, strlen(fe));
    usleep(300 * 1000);
    t0 = clock_mono_ms();
    ag_httpd_stop(&d);
    ok(d == NULL && atomic_load(&s_stop_writes) == 1 &&
           clock_mono_ms() - t0 < 10000,
       "stop with a stream open: the writer's write fails and stop returns");
    close(fd);

    /* A small pool: beyond workers + queue_max, 503 at once. */
    l.workers = 2;
    l.queue_max = 2;
    d = s_start(&l, &port);
    s_port = port;
    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = s_connect(port, NULL);
        const char *sl = "GET /sleep?n=1500 HTTP/1.0\r\n\r\n";
        (void)s_send(fds[i], sl, strlen(sl));
        usleep(20 * 1000);
    }
    int ok200 = 0, busy = 0;
    for (int i = 0; i < 8; i++) {
        ssize_t k = read(fds[i], out, sizeof out - 1);
        out[k > 0 ? k : 0] = '\0';
        ok200 += strncmp(out, "HTTP/1.0 200", 12) == 0 ||
                 strncmp(out, "HTTP/1.1 200", 12) == 0;
        busy += strstr(out, " 503 ") != NULL;
        close(fds[i]);
    }
    ok(ok200 == 4 && busy == 4,
       "2 workers and 2 queue places: 4 of 8 slow requests answered, 4 "
       "refused with 503 (%d, %d)",
       ok200, busy);
    ag_httpd_stop(&d);
    return done_testing();
}
