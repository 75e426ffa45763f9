/*
 * sb_egress_pump: the two-way copy of the relay and of the proxy.
 */
#include "sandbox/sb_egress_pump.h"

#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int
sb_egress_write_all(int fd, const void *buf, uint64_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
            n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (uint64_t)n;
    }
    return 0;
}

/* Would `n` more bytes pass the cap `max` given `mine` and `*shared`? */
static int
s_charge(uint64_t max, uint64_t *mine, uint64_t *shared, uint64_t n)
{
    uint64_t total =
        shared ? __atomic_add_fetch(shared, n, __ATOMIC_RELAXED) : *mine + n;
    *mine += n;
    return max && total > max ? -1 : 0;
}

sb_egress_pump_end_t
sb_egress_pump_run(int a, int b, sb_egress_pump_t *pp)
{
    char buf[65536];
    int open_a = 1, open_b = 1; /* a -> b and b -> a still flowing */
    int dead[2] = {0, 0};       /* writes to b (0) or to a (1) failed: what is
                                   read for that side is dropped, so the other
                                   way still drains (a 503 sent before the peer
                                   closed reaches the client) */
    int64_t last = clock_mono_ms();
    while (open_a || open_b) {
        int64_t now = clock_mono_ms();
        int wait = -1;
        if (pp->deadline_ms) {
            if (now >= pp->deadline_ms)
                return SB_PUMP_TIMEOUT;
            wait = (int)(pp->deadline_ms - now);
        }
        if (pp->idle_ms) {
            int64_t left = last + pp->idle_ms - now;
            if (left <= 0)
                return SB_PUMP_IDLE;
            if (wait < 0 || left < wait)
                wait = (int)left;
        }
        struct pollfd pf[2] = {{.fd = open_a ? a : -1, .events = POLLIN},
                               {.fd = open_b ? b : -1, .events = POLLIN}};
        int r = poll(pf, 2, wait);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return SB_PUMP_ERROR;
        for (int i = 0; i < 2; i++) {
            if (!pf[i].revents)
                continue;
            int from = i ? b : a, to = i ? a : b;
            ssize_t n = read(from, buf, sizeof buf);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) { /* EOF (or reset): pass the half-close on */
                shutdown(to, SHUT_WR);
                if (i)
                    open_b = 0;
                else
                    open_a = 0;
                if (n < 0)
                    return SB_PUMP_ERROR;
                continue;
            }
            last = clock_mono_ms();
            int over =
                i ? s_charge(pp->max_down, &pp->down, pp->shared_down,
                             (uint64_t)n)
                  : s_charge(pp->max_up, &pp->up, pp->shared_up, (uint64_t)n);
            if (over)
                return i ? SB_PUMP_CAP_DOWN : SB_PUMP_CAP_UP;
            if (!dead[i] && sb_egress_write_all(to, buf, (uint64_t)n) < 0)
                dead[i] = 1;
        }
    }
    return dead[0] || dead[1] ? SB_PUMP_ERROR : SB_PUMP_DONE;
}

const char *
sb_egress_pump_end_str(sb_egress_pump_end_t end)
{
    switch (end) {
    case SB_PUMP_DONE:
        return "closed";
    case SB_PUMP_TIMEOUT:
        return "connection time cap reached";
    case SB_PUMP_IDLE:
        return "idle too long";
    case SB_PUMP_CAP_UP:
        return "session byte cap (up) reached";
    case SB_PUMP_CAP_DOWN:
        return "session byte cap (down) reached";
    case SB_PUMP_ERROR:
        return "read or write failed";
    }
    return "?";
}
