/* sb_gvisor_relay: the host end of a gVisor box's relay (sb_gvisor.h;
 * the box end and the frame format: sb_gvisor_relay.py). One thread per
 * box, a poll loop; nothing the box sends is trusted: frame payloads are
 * capped at S_MAX_FRAME, names must be plain socket names, at most
 * S_MAX_LISTEN host sockets and S_MAX_CONN connections, and when a host
 * client is slow to read we stop reading the box (backpressure) rather
 * than buffer without bound. */
#include "sandbox/sb_gvisor.h"

#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define S_HDR 9
#define S_MAX_FRAME (1u << 20)
#define S_MAX_LISTEN 32
#define S_MAX_CONN 256
#define S_HIGH_WATER (16u << 20) /* stop reading the other side above this */
#define S_CHUNK 65536

typedef struct s_queue {
    char *d;
    size_t off, len, cap;
} s_queue_t;

typedef struct s_conn {
    int fd;
    uint32_t chan;
    s_queue_t out; /* to this host client */
} s_conn_t;

typedef struct s_listener {
    int fd;
    char name[64];
} s_listener_t;

struct sb_gv_relay {
    pthread_t th;
    bool started;
    int lfd;     /* the relay socket we listen on */
    int rfd;     /* the box's relay, or -1 */
    int wake[2]; /* to the thread: 0 stops it, else a signal to deliver */
    int ready[2];
    char *sock_dir;
    char *relay_path;
    s_listener_t ls[S_MAX_LISTEN];
    int nls;
    s_conn_t conns[S_MAX_CONN];
    int nconns;
    uint32_t next_chan;
    s_queue_t rout; /* to the box */
    char *rin;      /* from the box: one frame at most */
    size_t rin_len;
    int status; /* the program's wait status, or -1 (atomic) */
    int gone;   /* the box's relay came and went (atomic) */
    int parked; /* the box's relay let go of its stream on 'P' (atomic) */
};

#define S_CMD_PARK 255 /* on the wake pipe: ask the box's relay to park */

static void
s_q_push(s_queue_t *q, const void *p, size_t n)
{
    if (q->off && q->off == q->len)
        q->off = q->len = 0;
    if (q->len + n > q->cap) {
        if (q->off) {
            memmove(q->d, q->d + q->off, q->len - q->off);
            q->len -= q->off;
            q->off = 0;
        }
        if (q->len + n > q->cap) {
            q->cap = (q->len + n) * 2;
            q->d = xrealloc(q->d, q->cap);
        }
    }
    memcpy(q->d + q->len, p, n);
    q->len += n;
}

static size_t
s_q_size(const s_queue_t *q)
{
    return q->len - q->off;
}

/* Write what fd takes; -1 when it is broken. */
static int
s_q_flush(s_queue_t *q, int fd)
{
    while (s_q_size(q)) {
        ssize_t n =
            send(fd, q->d + q->off, s_q_size(q), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        q->off += (size_t)n;
    }
    q->off = q->len = 0;
    return 0;
}

static void
s_frame(sb_gv_relay_t *r, char kind, uint32_t chan, const void *p, size_t n)
{
    unsigned char h[S_HDR] = {(unsigned char)kind,
                              (unsigned char)(chan >> 24),
                              (unsigned char)(chan >> 16),
                              (unsigned char)(chan >> 8),
                              (unsigned char)chan,
                              (unsigned char)(n >> 24),
                              (unsigned char)(n >> 16),
                              (unsigned char)(n >> 8),
                              (unsigned char)n};
    s_q_push(&r->rout, h, sizeof h);
    if (n)
        s_q_push(&r->rout, p, n);
}

static void
s_conn_close(sb_gv_relay_t *r, int i)
{
    close(r->conns[i].fd);
    free(r->conns[i].out.d);
    r->conns[i] = r->conns[--r->nconns];
}

static int
s_conn_find(const sb_gv_relay_t *r, uint32_t chan)
{
    for (int i = 0; i < r->nconns; i++)
        if (r->conns[i].chan == chan)
            return i;
    return -1;
}

/* The box ended its side: every connection through it ends too. */
static void
s_drop_box(sb_gv_relay_t *r)
{
    if (r->rfd >= 0) {
        close(r->rfd);
        __atomic_store_n(&r->gone, 1, __ATOMIC_SEQ_CST);
    }
    r->rfd = -1;
    r->rin_len = 0;
    r->rout.off = r->rout.len = 0;
    while (r->nconns)
        s_conn_close(r, r->nconns - 1);
}

static bool
s_name_ok(const char *p, size_t n)
{
    if (n == 0 || n >= 48 || p[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

static void
s_listen(sb_gv_relay_t *r, const char *name, size_t n)
{
    if (!s_name_ok(name, n) || r->nls >= S_MAX_LISTEN)
        return;
    for (int i = 0; i < r->nls; i++)
        if (strlen(r->ls[i].name) == n && memcmp(r->ls[i].name, name, n) == 0)
            return;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int len = snprintf(a.sun_path, sizeof a.sun_path, "%s/%.*s", r->sock_dir,
                       (int)n, name);
    if (len < 0 || (size_t)len >= sizeof a.sun_path)
        return;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    unlink(a.sun_path); /* our own dir: a socket of an earlier box */
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0) {
        close(fd);
        return;
    }
    r->ls[r->nls].fd = fd;
    memcpy(r->ls[r->nls].name, name, n);
    r->ls[r->nls].name[n] = '\0';
    r->nls++;
}

/* One complete frame from the box; -1 drops the box (it broke the rules). */
static int
s_box_frame(sb_gv_relay_t *r, char kind, uint32_t chan, const char *p, size_t n)
{
    int i;
    switch (kind) {
    case 'H':
        if (write(r->ready[1], "h", 1) < 0) {
        }
        return 0;
    case 'L':
        s_listen(r, p, n);
        return 0;
    case 'D':
        if ((i = s_conn_find(r, chan)) >= 0)
            s_q_push(&r->conns[i].out, p, n);
        return 0;
    case 'X':
        if ((i = s_conn_find(r, chan)) >= 0)
            s_conn_close(r, i);
        return 0;
    case 'E':
        __atomic_store_n(&r->status, (int)chan, __ATOMIC_SEQ_CST);
        return 0;
    case 'p': /* parked: no socket of ours left for it to reach, then EOF */
        if (r->lfd >= 0) {
            close(r->lfd);
            unlink(r->relay_path);
            r->lfd = -1;
        }
        close(r->rfd);
        r->rfd = -1;
        r->rin_len = 0;
        r->rout.off = r->rout.len = 0;
        while (r->nconns)
            s_conn_close(r, r->nconns - 1);
        __atomic_store_n(&r->parked, 1, __ATOMIC_SEQ_CST);
        return 1;
    default:
        return -1;
    }
}

static void
s_box_read(sb_gv_relay_t *r)
{
    for (;;) {
        size_t want = r->rin_len < S_HDR ? S_HDR - r->rin_len : 0;
        if (!want) {
            const unsigned char *h = (const unsigned char *)r->rin;
            size_t n = (size_t)h[5] << 24 | (size_t)h[6] << 16 |
                       (size_t)h[7] << 8 | h[8];
            if (n > S_MAX_FRAME) {
                s_drop_box(r);
                return;
            }
            want = S_HDR + n - r->rin_len;
            if (!want) {
                uint32_t chan = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 |
                                (uint32_t)h[3] << 8 | h[4];
                int fr = s_box_frame(r, (char)h[0], chan, r->rin + S_HDR, n);
                if (fr < 0) {
                    s_drop_box(r);
                    return;
                }
                r->rin_len = 0;
                if (fr > 0) /* parked: the stream is gone */
                    return;
                continue;
            }
        }
        ssize_t got = recv(r->rfd, r->rin + r->rin_len, want, MSG_DONTWAIT);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (got <= 0) {
            s_drop_box(r);
            return;
        }
        r->rin_len += (size_t)got;
    }
}

static bool
s_clients_backed_up(const sb_gv_relay_t *r)
{
    for (int i = 0; i < r->nconns; i++)
        if (s_q_size(&r->conns[i].out) > S_HIGH_WATER)
            return true;
    return false;
}

static void *
s_thread(void *arg)
{
    sb_gv_relay_t *r = arg;
    struct pollfd pf[3 + S_MAX_LISTEN + S_MAX_CONN];
    char buf[S_CHUNK];
    for (;;) {
        int n = 0;
        pf[n++] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        pf[n++] =
            (struct pollfd){.fd = r->rfd < 0 ? r->lfd : -1, .events = POLLIN};
        short rev = s_clients_backed_up(r) ? 0 : POLLIN;
        if (s_q_size(&r->rout))
            rev |= POLLOUT;
        pf[n++] = (struct pollfd){.fd = r->rfd, .events = rev};
        int l0 = n;
        for (int i = 0; i < r->nls; i++)
            pf[n++] = (struct pollfd){.fd = r->rfd >= 0 ? r->ls[i].fd : -1,
                                      .events = POLLIN};
        int c0 = n;
        bool box_full = s_q_size(&r->rout) > S_HIGH_WATER;
        for (int i = 0; i < r->nconns; i++)
            pf[n++] = (struct pollfd){
                .fd = r->conns[i].fd,
                .events = (short)((box_full ? 0 : POLLIN) |
                                  (s_q_size(&r->conns[i].out) ? POLLOUT : 0))};
        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[0].revents) {
            unsigned char cmd[16];
            ssize_t got = read(r->wake[0], cmd, sizeof cmd);
            bool stop = got <= 0;
            for (ssize_t i = 0; i < got; i++) {
                if (cmd[i] == 0)
                    stop = true;
                else if (cmd[i] == S_CMD_PARK && r->rfd >= 0)
                    s_frame(r, 'P', 0, NULL, 0);
                else if (r->rfd >= 0)
                    s_frame(r, 'S', cmd[i], NULL, 0);
            }
            if (stop)
                break;
        }
        if (r->lfd >= 0 && pf[1].revents & POLLIN) {
            r->rfd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        }
        if (r->rfd >= 0 && pf[2].fd == r->rfd && pf[2].revents) {
            if (pf[2].revents & POLLOUT && s_q_flush(&r->rout, r->rfd) < 0)
                s_drop_box(r);
            else if (pf[2].revents & (POLLIN | POLLHUP | POLLERR))
                s_box_read(r);
        }
        /* Clients first from the end: closing one moves the last. */
        for (int i = r->nconns - 1; i >= 0; i--) {
            short re = pf[c0 + i].revents;
            if (i >= r->nconns || pf[c0 + i].fd != r->conns[i].fd || !re)
                continue;
            s_conn_t *c = &r->conns[i];
            if (re & POLLOUT && s_q_flush(&c->out, c->fd) < 0) {
                s_frame(r, 'X', c->chan, NULL, 0);
                s_conn_close(r, i);
                continue;
            }
            if (re & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t got = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
                if (got > 0) {
                    s_frame(r, 'D', c->chan, buf, (size_t)got);
                } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                    s_frame(r, 'X', c->chan, NULL, 0);
                    s_conn_close(r, i);
                }
            }
        }
        for (int i = 0; i < r->nls && r->rfd >= 0; i++) {
            if (!(pf[l0 + i].revents & POLLIN))
                continue;
            int cfd =
                accept4(r->ls[i].fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (cfd < 0)
                continue;
            if (r->nconns >= S_MAX_CONN) {
                close(cfd);
                continue;
            }
            s_conn_t *c = &r->conns[r->nconns++];
            memset(c, 0, sizeof *c);
            c->fd = cfd;
            c->chan = ++r->next_chan;
            s_frame(r, 'C', c->chan, r->ls[i].name, strlen(r->ls[i].name));
        }
        if (r->rfd >= 0 && s_q_size(&r->rout) &&
            s_q_flush(&r->rout, r->rfd) < 0)
            s_drop_box(r);
    }
    return NULL;
}

sb_gv_relay_t *
sb_gv_relay_new(const char *relay_path, const char *sock_dir, err_t *err)
{
    sb_gv_relay_t *r = xcalloc(1, sizeof *r);
    r->lfd = r->rfd = -1;
    r->wake[0] = r->wake[1] = r->ready[0] = r->ready[1] = -1;
    r->status = -1;
    r->sock_dir = xstrdup(sock_dir);
    r->relay_path = xstrdup(relay_path);
    r->rin = xmalloc(S_HDR + S_MAX_FRAME);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(relay_path) >= sizeof a.sun_path) {
        err_set(err, ERR_SANDBOX, "sandbox: relay socket path %s is too long",
                relay_path);
        goto fail;
    }
    strcpy(a.sun_path, relay_path);
    unlink(relay_path);
    r->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
        chmod(relay_path, 0666) < 0 || listen(r->lfd, 4) < 0 ||
        pipe2(r->wake, O_CLOEXEC) < 0 || pipe2(r->ready, O_CLOEXEC) < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: relay socket %s", relay_path);
        goto fail;
    }
    /* The thread must not take the launcher's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int e = pthread_create(&r->th, NULL, s_thread, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        errno = e;
        err_errno(err, ERR_SANDBOX, "sandbox: starting the relay thread");
        goto fail;
    }
    r->started = true;
    return r;
fail:
    sb_gv_relay_destroy(&r);
    return NULL;
}

int
sb_gv_relay_ready_fd(const sb_gv_relay_t *r)
{
    return r->ready[0];
}

int
sb_gv_relay_signal(sb_gv_relay_t *r, int sig)
{
    unsigned char b = (unsigned char)sig;
    if (sig <= 0 || sig > 64) {
        errno = EINVAL;
        return -1;
    }
    return write(r->wake[1], &b, 1) == 1 ? 0 : -1;
}

int
sb_gv_relay_park(sb_gv_relay_t *r, int timeout_ms)
{
    unsigned char b = S_CMD_PARK;
    if (r->rfd < 0 && !sb_gv_relay_parked(r)) {
        errno = ESRCH;
        return -1;
    }
    if (write(r->wake[1], &b, 1) != 1)
        return -1;
    for (int t = 0; t < timeout_ms; t += 5) {
        if (sb_gv_relay_parked(r))
            return 0;
        if (sb_gv_relay_gone(r)) {
            errno = ESRCH;
            return -1;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    errno = ETIMEDOUT;
    return -1;
}

bool
sb_gv_relay_parked(const sb_gv_relay_t *r)
{
    return __atomic_load_n(&r->parked, __ATOMIC_SEQ_CST) != 0;
}

bool
sb_gv_relay_gone(const sb_gv_relay_t *r)
{
    return __atomic_load_n(&r->gone, __ATOMIC_SEQ_CST) != 0;
}

int
sb_gv_relay_status(const sb_gv_relay_t *r)
{
    return __atomic_load_n(&r->status, __ATOMIC_SEQ_CST);
}

void
sb_gv_relay_destroy(sb_gv_relay_t **pp)
{
    sb_gv_relay_t *r = pp ? *pp : NULL;
    if (!r)
        return;
    *pp = NULL;
    if (r->started) {
        unsigned char stop = 0;
        while (write(r->wake[1], &stop, 1) < 0 && errno == EINTR)
            ;
        pthread_join(r->th, NULL);
    }
    s_drop_box(r);
    for (int i = 0; i < r->nls; i++) {
        char *path = xasprintf("%s/%s", r->sock_dir, r->ls[i].name);
        unlink(path);
        free(path);
        close(r->ls[i].fd);
    }
    int fds[] = {r->lfd, r->wake[0], r->wake[1], r->ready[0], r->ready[1]};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (r->lfd >= 0)
        unlink(r->relay_path);
    free(r->rout.d);
    free(r->rin);
    free(r->sock_dir);
    free(r->relay_path);
    free(r);
}
