/* A pty between a sandboxed command and the user's terminal (ag_pty.h). */
#include "agent/cli/ag_pty.h"

#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* One read of the master copies at most this much; one poll_done reads
 * it at most DRAIN_READS times, so a chatty command cannot keep the
 * caller from its deadline and signals. */
#define CHUNK 65536
#define DRAIN_READS 16
/* After the command ended: at most this much is still copied out (a
 * process the box left behind could write for ever). */
#define DRAIN_MAX ((size_t)64 << 20)

struct ag_pty {
    int master;           /* owned, non-blocking */
    int slave;            /* owned until ag_pty_start, then -1 */
    bool tty[3];          /* stdio fd i is a terminal */
    int ref;              /* the first of them: modes and size come from it */
    int out;              /* where the master's output goes, or -1 */
    bool raw;             /* stdin is in raw mode; `saved` restores it */
    struct termios saved; /* stdin's modes before */
    bool in_open;         /* still reading stdin */
    bool master_open;     /* the master still has a slave (no EIO yet) */
    char in[4096];        /* stdin bytes not yet written to the master */
    size_t in_len, in_off;
};

ag_pty_t *
ag_pty_new(err_t *err)
{
    err_clear(err);
    bool any = false, tty[3];
    for (int i = 0; i < 3; i++)
        any |= tty[i] = isatty(i) == 1;
    if (!any)
        return NULL;
    ag_pty_t *p = xcalloc(1, sizeof *p);
    p->slave = -1;
    memcpy(p->tty, tty, sizeof tty);
    p->ref = tty[0] ? 0 : tty[1] ? 1 : 2;
    p->out = tty[1] ? 1 : tty[2] ? 2 : 0;
    char name[128];
    p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (p->master < 0 || grantpt(p->master) < 0 || unlockpt(p->master) < 0 ||
        ptsname_r(p->master, name, sizeof name) != 0 ||
        (p->slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
        fcntl(p->master, F_SETFL, O_NONBLOCK) < 0) {
        err_set(err, ERR_SANDBOX,
                "cannot make a pty to stand between the command and your "
                "terminal: %s; run it with stdin, stdout and stderr "
                "redirected away from the terminal",
                strerror(errno));
        ag_pty_destroy(&p);
        return NULL;
    }
    struct termios t;
    struct winsize ws;
    if (tcgetattr(p->ref, &t) == 0)
        tcsetattr(p->slave, TCSANOW, &t);
    if (ioctl(p->ref, TIOCGWINSZ, &ws) == 0)
        ioctl(p->master, TIOCSWINSZ, &ws);
    p->master_open = true;
    return p;
}

void
ag_pty_destroy(ag_pty_t **pp)
{
    if (!pp || !*pp)
        return;
    ag_pty_t *p = *pp;
    if (p->raw)
        tcsetattr(0, TCSADRAIN, &p->saved);
    if (p->slave >= 0)
        close(p->slave);
    if (p->master >= 0)
        close(p->master);
    free(p);
    *pp = NULL;
}

int
ag_pty_stdio(const ag_pty_t *p, int i)
{
    return p && i >= 0 && i < 3 && p->tty[i] ? p->slave : i;
}

bool
ag_pty_has_stdin(const ag_pty_t *p)
{
    return p && p->tty[0];
}

void
ag_pty_start(ag_pty_t *p)
{
    if (!p)
        return;
    if (p->slave >= 0)
        close(p->slave); /* the box has its own: EIO once it is gone */
    p->slave = -1;
    p->in_open = p->tty[0];
    /* Only the foreground job may change the terminal's modes. */
    if (p->tty[0] && tcgetpgrp(0) == getpgrp() &&
        tcgetattr(0, &p->saved) == 0) {
        struct termios raw = p->saved;
        cfmakeraw(&raw);
        p->raw = tcsetattr(0, TCSADRAIN, &raw) == 0;
    }
}

void
ag_pty_poll_setup(ag_pty_t *p, struct pollfd *pf, int *n)
{
    if (!p)
        return;
    if (p->master_open) {
        short ev = POLLIN;
        if (p->in_off < p->in_len)
            ev |= POLLOUT;
        pf[(*n)++] = (struct pollfd){.fd = p->master, .events = ev};
    }
    if (p->in_open && p->in_off == p->in_len && p->master_open)
        pf[(*n)++] = (struct pollfd){.fd = 0, .events = POLLIN};
}

/* Write all of buf to the user's terminal, waiting while it is full. */
static void
s_write_out(ag_pty_t *p, const char *buf, size_t len)
{
    while (len && p->out >= 0) {
        ssize_t w = write(p->out, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = p->out, .events = POLLOUT};
            poll(&pf, 1, 1000);
            continue;
        }
        if (w <= 0) {
            p->out = -1; /* the terminal is gone: discard */
            return;
        }
        buf += w;
        len -= (size_t)w;
    }
}

/* Copy from the master at most `reads` times or `max` bytes; false when
 * nothing more is waiting. */
static bool
s_copy_out(ag_pty_t *p, int reads, size_t max)
{
    char buf[CHUNK];
    size_t done = 0;
    for (int i = 0; i < reads && done < max && p->master_open; i++) {
        ssize_t r = read(p->master, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return false;
        if (r <= 0) { /* EIO: no slave is open any more */
            p->master_open = false;
            return false;
        }
        s_write_out(p, buf, (size_t)r);
        done += (size_t)r;
    }
    return p->master_open;
}

static void
s_copy_in(ag_pty_t *p)
{
    while (p->in_off < p->in_len) {
        ssize_t w = write(p->master, p->in + p->in_off, p->in_len - p->in_off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return; /* the command is not reading: wait for POLLOUT */
        if (w <= 0) {
            p->in_off = p->in_len = 0;
            p->master_open = false;
            return;
        }
        p->in_off += (size_t)w;
    }
    p->in_off = p->in_len = 0;
}

void
ag_pty_poll_done(ag_pty_t *p, const struct pollfd *pf, int n)
{
    if (!p)
        return;
    for (int i = 0; i < n; i++) {
        if (!pf[i].revents)
            continue;
        if (pf[i].fd == 0 && p->in_open) {
            ssize_t r = read(0, p->in, sizeof p->in);
            if (r > 0) {
                p->in_len = (size_t)r;
                p->in_off = 0;
                s_copy_in(p);
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                p->in_open = false; /* hung up: SIGHUP follows */
            }
        } else if (pf[i].fd == p->master) {
            if (pf[i].revents & POLLOUT)
                s_copy_in(p);
            if (pf[i].revents & (POLLIN | POLLHUP | POLLERR))
                s_copy_out(p, DRAIN_READS, (size_t)-1);
        }
    }
}

void
ag_pty_winch(ag_pty_t *p)
{
    struct winsize ws;
    if (p && ioctl(p->ref, TIOCGWINSZ, &ws) == 0)
        ioctl(p->master, TIOCSWINSZ, &ws);
}

void
ag_pty_drain(ag_pty_t *p)
{
    if (p)
        s_copy_out(p, (int)(DRAIN_MAX / CHUNK), DRAIN_MAX);
}
