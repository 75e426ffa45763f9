/* iopub over a plain socket on the caller's thread (see kb_zmtp_sub.h). */
#include "kb_zmtp_sub.h"

#include "kernel-bridge/wire/kb_zmtp.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* One read() asks for at least this much room: a batch of outputs that
 * piled up while the caller was busy arrives in a few calls. */
#define READ_CHUNK ((size_t)64 << 10)
/* Read-ahead while the caller is slow: at most this many bytes waiting to
 * be decoded (libzmq's SUB queued up to IOPUB_RCVHWM messages), and one
 * read per READ_AHEAD_US. */
#define READ_AHEAD_MAX ((size_t)32 << 20)
#define READ_AHEAD_US 1000
/* One next() call reads at most this many times: a peer that sends a
 * frame to skip as fast as we skip it cannot keep the caller inside. */
#define READS_PER_CALL 16

struct kb_zmtp_sub {
    struct sockaddr_storage addr; /* where the kernel's PUB listens */
    socklen_t addrlen;
    int fd;             /* -1 while disconnected */
    bool connecting;    /* a TCP connect is in progress */
    const uint8_t *out; /* static bytes being written: the hello,
                           then the subscription; NULL when done */
    size_t out_len, out_sent;
    bool subscribed;     /* the subscription was queued */
    int reconnect_ms;    /* pause between connect attempts */
    int64_t retry_at_ms; /* next attempt while disconnected */
    kb_zmtp_t dec;       /* the current connection's decoder */
    size_t max_bytes, max_frames;
    uint8_t *buf; /* owned: received bytes, undecoded in [start, end) */
    size_t cap, start, end;
    bool maybe_more;      /* the last next() found something: there may be
                             more buffered, so do not sleep */
    int64_t last_read_us; /* when recv() was last called */
    bool ended;           /* the peer closed or the socket failed; what was
                             read is decoded before reconnecting */
    char ended_why[96];
    bool warned; /* a protocol error was logged */
};

/* ipc://PATH or tcp://IP:PORT (IPv6 in brackets) into s->addr. */
static bool
s_parse(kb_zmtp_sub_t *s, const char *endpoint)
{
    memset(&s->addr, 0, sizeof s->addr);
    if (!strncmp(endpoint, "ipc://", 6)) {
        struct sockaddr_un *un = (struct sockaddr_un *)&s->addr;
        const char *path = endpoint + 6;
        if (strlen(path) >= sizeof un->sun_path || !path[0])
            return false;
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        s->addrlen = sizeof *un;
        return true;
    }
    if (strncmp(endpoint, "tcp://", 6))
        return false;
    char host[64];
    const char *h = endpoint + 6, *colon = strrchr(h, ':');
    if (!colon || (size_t)(colon - h) >= sizeof host)
        return false;
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535)
        return false;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&s->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&s->addr;
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
            return false;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        s->addrlen = sizeof *in6;
        return true;
    }
    if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
        return false; /* a host name: libzmq resolves it */
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)port);
    s->addrlen = sizeof *in4;
    return true;
}

/* Close the connection (or the attempt) and schedule the next one. `why`
 * NULL: a connect that did not go through, not worth a log line. */
static void
s_disconnect(kb_zmtp_sub_t *s, const char *why)
{
    if (s->fd >= 0) {
        if (why)
            log_debug("iopub: disconnected (%s); reconnecting", why);
        close(s->fd);
    }
    s->fd = -1;
    s->connecting = false;
    s->ended = false;
    s->start = s->end = 0;
    s->maybe_more = false;
    s->retry_at_ms = clock_mono_ms() + s->reconnect_ms;
}

/* Write what is left of s->out; false when the connection failed. */
static bool
s_flush(kb_zmtp_sub_t *s)
{
    while (s->out) {
        ssize_t w = send(s->fd, s->out + s->out_sent, s->out_len - s->out_sent,
                         MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (w <= 0) {
            s_disconnect(s, strerror(errno));
            return false;
        }
        s->out_sent += (size_t)w;
        if (s->out_sent == s->out_len)
            s->out = NULL;
    }
    return true;
}

/* Queue `len` static bytes (nothing else is queued) and start writing. */
static bool
s_write(kb_zmtp_sub_t *s, const uint8_t *bytes, size_t len)
{
    s->out = bytes;
    s->out_len = len;
    s->out_sent = 0;
    return s_flush(s);
}

static void
s_connect(kb_zmtp_sub_t *s)
{
    s->fd = socket(s->addr.ss_family,
                   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        s_disconnect(s, strerror(errno));
        return;
    }
    kb_zmtp_init(&s->dec, s->max_bytes, s->max_frames);
    s->out = kb_zmtp_hello();
    s->out_len = KB_ZMTP_HELLO_LEN;
    s->out_sent = 0;
    s->subscribed = false;
    if (connect(s->fd, (struct sockaddr *)&s->addr, s->addrlen) == 0)
        s_flush(s);
    else if (errno == EINPROGRESS)
        s->connecting = true;
    else /* not bound yet (ENOENT, ECONNREFUSED) or backlog full */
        s_disconnect(s, NULL);
}

kb_zmtp_sub_t *
kb_zmtp_sub_new(const char *endpoint, size_t max_bytes, size_t max_frames,
                int reconnect_ms)
{
    kb_zmtp_sub_t *s = xcalloc(1, sizeof *s);
    if (!s_parse(s, endpoint)) {
        free(s);
        return NULL;
    }
    s->fd = -1;
    s->reconnect_ms = reconnect_ms;
    s->max_bytes = max_bytes;
    s->max_frames = max_frames;
    s_connect(s);
    return s;
}

void
kb_zmtp_sub_set_max_bytes(kb_zmtp_sub_t *s, size_t max_bytes)
{
    s->max_bytes = max_bytes;
    s->dec.max_bytes = max_bytes;
}

void
kb_zmtp_sub_destroy(kb_zmtp_sub_t **ps)
{
    if (!ps || !*ps)
        return;
    kb_zmtp_sub_t *s = *ps;
    if (s->fd >= 0)
        close(s->fd);
    free(s->buf);
    free(s);
    *ps = NULL;
}

bool
kb_zmtp_sub_open(const kb_zmtp_sub_t *s)
{
    return s->fd >= 0 && s->dec.state == KB_ZMTP_OPEN;
}

bool
kb_zmtp_sub_poll_setup(kb_zmtp_sub_t *s, bool reading, int *fd, short *events,
                       int *timeout_ms)
{
    *fd = -1;
    *events = 0;
    if (s->fd < 0) {
        int64_t due = s->retry_at_ms - clock_mono_ms();
        if (due < 0)
            due = 0;
        if (*timeout_ms < 0 || due < *timeout_ms)
            *timeout_ms = (int)due;
        return false;
    }
    if (reading && s->maybe_more)
        return true;
    if (s->connecting || s->out)
        *events |= POLLOUT;
    if (reading)
        *events |= POLLIN;
    if (*events)
        *fd = s->fd;
    return false;
}

void
kb_zmtp_sub_poll_done(kb_zmtp_sub_t *s, short revents)
{
    if (s->fd < 0) {
        if (clock_mono_ms() >= s->retry_at_ms)
            s_connect(s);
        return;
    }
    if (s->connecting && (revents & (POLLOUT | POLLERR | POLLHUP))) {
        int e = 0;
        socklen_t el = sizeof e;
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &el);
        s->connecting = false;
        if (e) {
            s_disconnect(s, NULL);
            return;
        }
    }
    if (!s->connecting && (revents & POLLOUT))
        s_flush(s);
}

/* Read what the socket holds into the buffer, after the undecoded bytes.
 * 1: read some; 0: nothing there; -1: the connection ended (s->ended
 * says why; the bytes already read are still there to decode). */
static int
s_fill(kb_zmtp_sub_t *s)
{
    if (s->connecting || s->ended)
        return s->ended ? -1 : 0;
    if (s->out && !s_flush(s))
        return -1;
    if (s->start == s->end) {
        s->start = s->end = 0;
        if (s->cap > 16 * READ_CHUNK) { /* after a huge one */
            free(s->buf);
            s->buf = NULL;
            s->cap = 0;
        }
    }
    if (s->cap - s->end < READ_CHUNK && s->start) {
        /* Move the undecoded bytes to the front only when room is needed:
         * read-ahead can hold many messages. */
        memmove(s->buf, s->buf + s->start, s->end - s->start);
        s->end -= s->start;
        s->start = 0;
    }
    if (s->cap - s->end < READ_CHUNK) {
        /* Bounded: the decoder drops any message over max_bytes, and
         * read-ahead stops at READ_AHEAD_MAX. */
        s->cap = s->cap ? s->cap * 2 : 2 * READ_CHUNK;
        while (s->cap - s->end < READ_CHUNK)
            s->cap *= 2;
        s->buf = xrealloc(s->buf, s->cap);
    }
    ssize_t r = recv(s->fd, s->buf + s->end, s->cap - s->end, 0);
    s->last_read_us = clock_mono_us();
    if (r > 0) {
        s->end += (size_t)r;
        return 1;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    snprintf(s->ended_why, sizeof s->ended_why, "%s",
             r == 0 ? "the kernel closed iopub" : strerror(errno));
    s->ended = true;
    return -1;
}

kb_zmtp_next_t
kb_zmtp_sub_next(kb_zmtp_sub_t *s, kb_frame_t *frames, size_t *n)
{
    *n = 0;
    int reads = 0;
    s->maybe_more = false;
    /* A caller that takes long per message (a slow hook, a blocked
     * stdout) would leave the kernel's own queue to fill, and its PUB
     * drops what passes its high-water mark: keep reading ahead, at most
     * once per READ_AHEAD_US so a fast caller pays no extra system call. */
    if (s->fd >= 0 && s->start < s->end && s->end - s->start < READ_AHEAD_MAX &&
        clock_mono_us() - s->last_read_us > READ_AHEAD_US)
        s_fill(s);
    while (s->fd >= 0) {
        size_t used = 0;
        kb_zmtp_result_t r = kb_zmtp_decode(
            &s->dec, s->buf + s->start, s->end - s->start, &used, frames, n);
        s->start += used;
        if (s->dec.state == KB_ZMTP_OPEN && !s->subscribed) {
            s->subscribed = true;
            if (!s_write(s, kb_zmtp_subscribe(), KB_ZMTP_SUBSCRIBE_LEN))
                break;
        }
        if (r == KB_ZMTP_MSG || r == KB_ZMTP_DROPPED) {
            s->maybe_more = true;
            return r == KB_ZMTP_MSG ? KB_ZMTP_SUB_MSG : KB_ZMTP_SUB_DROPPED;
        }
        if (r == KB_ZMTP_ERROR) {
            /* Once per reader: a kernel that breaks the protocol on every
             * reconnect must not fill the terminal (the text is the
             * peer's, made printable by kb_zmtp). */
            if (!s->warned)
                log_warn("iopub: %s; reconnecting", s->dec.why);
            s->warned = true;
            s_disconnect(s, s->dec.why);
            break;
        }
        if (reads++ == READS_PER_CALL) {
            s->maybe_more = true; /* not drained: poll must not sleep */
            break;
        }
        int f = s_fill(s);
        if (f < 0 && s->ended)
            s_disconnect(s, s->ended_why);
        if (f <= 0)
            break;
    }
    return KB_ZMTP_SUB_NONE;
}
