/* sb_cmds: see sb_cmds.h. One mutex guards the table; the reader thread
 * polls the engine, every open pipe and a wake-up eventfd, and broadcasts
 * `cv` whenever output, a start answer or an end arrives.
 *
 * The log of a command is a byte buffer of records: a stream byte (1 or
 * 2), a 4-byte length, the bytes. A cursor is an offset into it at a
 * record boundary. */
#include "sandbox/sb_cmds.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h" /* SB_CMD_MAX */

#define START_TIMEOUT_MS 15000
#define READ_CHUNK 65536

enum s_phase { STARTING, RUNNING, EXITED, DONE };

struct s_cmd {
    unsigned id;        /* the manager's, never reused */
    enum s_phase phase; /* STARTING until the engine answered */
    int pid;            /* inside the box, once RUNNING */
    char *tag;          /* owned, or NULL */
    char **argv;        /* owned copy */
    char *cwd;          /* owned */
    int in, out, err;   /* owned pipe ends (a pty's master), or -1 */
    bool pty;           /* out is a pty master: SB_CMDS_PTY records */
    buf_t log;          /* records (see above) */
    size_t payload;     /* output bytes in the log */
    size_t cap;         /* max payload */
    int64_t deadline;   /* monotonic ms, or 0 */
    int64_t exited_at;  /* when the engine said it exited */
    int timeout_ms;     /* as granted, for the message */
    int status;         /* wait status once EXITED */
    bool timed_out, capped, box_gone;
    err_t start_err;    /* FAILED's reason */
    bool failed;        /* the start failed */
    struct s_cmd *next; /* list, newest first */
};

struct sb_cmds {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool thread_started;
    bool stop;           /* destroy asked the thread to end */
    bool gone;           /* the engine reported the box gone */
    int wake;            /* eventfd */
    sb_proc_engine_t *e; /* owned */
    sb_cmds_limits_t lim;
    unsigned next_id;
    struct s_cmd *cmds;
};

static void
s_wake(sb_cmds_t *m)
{
    uint64_t one = 1;
    if (write(m->wake, &one, sizeof one) < 0) { /* already pending */
    }
}

static void
s_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void
s_free_cmd(struct s_cmd *c)
{
    s_close(&c->in);
    s_close(&c->out);
    s_close(&c->err);
    buf_release(&c->log);
    free(c->tag);
    free(c->cwd);
    strv_free(c->argv);
    free(c);
}

static struct s_cmd *
s_find(sb_cmds_t *m, unsigned id)
{
    for (struct s_cmd *c = m->cmds; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

static void
s_kill(sb_cmds_t *m, struct s_cmd *c)
{
    if (c->phase == RUNNING && !m->gone)
        m->e->ops->signal(m->e->self, c->id, SIGKILL, NULL);
}

/* Drop the oldest finished commands past max_kept. */
static void
s_trim(sb_cmds_t *m)
{
    unsigned kept = 0;
    for (struct s_cmd **pc = &m->cmds; *pc;) {
        struct s_cmd *c = *pc;
        if (c->phase == DONE && ++kept > m->lim.max_kept) {
            *pc = c->next;
            s_free_cmd(c);
            continue;
        }
        pc = &c->next;
    }
}

static void
s_append(sb_cmds_t *m, struct s_cmd *c, int stream, const char *p, size_t n)
{
    if (c->capped)
        return;
    if (c->payload + n > c->cap) {
        n = c->cap - c->payload; /* keep what fits, then stop it */
        c->capped = true;
        s_kill(m, c);
        s_close(&c->out);
        s_close(&c->err);
    }
    if (n == 0)
        return;
    unsigned char hdr[5] = {(unsigned char)stream};
    uint32_t l = (uint32_t)n;
    memcpy(hdr + 1, &l, 4);
    buf_append(&c->log, hdr, sizeof hdr);
    buf_append(&c->log, p, n);
    c->payload += n;
}

static void
s_event(sb_cmds_t *m, const sb_proc_event_t *ev)
{
    struct s_cmd *c = s_find(m, ev->id);
    if (!c)
        return;
    if (ev->kind == SB_PROC_STARTED && c->phase == STARTING) {
        c->phase = RUNNING;
        c->pid = ev->pid;
    } else if (ev->kind == SB_PROC_FAILED && c->phase == STARTING) {
        c->failed = true;
        err_set(&c->start_err, ev->code, "command: %s", ev->text);
        c->phase = DONE;
    } else if (ev->kind == SB_PROC_EXITED && c->phase == RUNNING) {
        c->phase = EXITED;
        c->status = ev->status;
        c->exited_at = clock_mono_ms();
    }
}

static void
s_settle(sb_cmds_t *m, int64_t now)
{
    for (struct s_cmd *c = m->cmds; c; c = c->next) {
        if (m->gone && (c->phase == RUNNING || c->phase == STARTING)) {
            if (c->phase == STARTING) {
                c->failed = true;
                err_set(&c->start_err, ERR_SANDBOX,
                        "command: the box ended before it started");
            }
            c->box_gone = true;
            c->phase = EXITED;
            c->status = SIGKILL; /* a wait status: killed by SIGKILL */
            c->exited_at = now;
        }
        if (c->phase == RUNNING && c->deadline && now >= c->deadline &&
            !c->timed_out) {
            c->timed_out = true;
            s_kill(m, c);
        }
        if (c->phase == EXITED && ((c->out < 0 && c->err < 0) ||
                                   now - c->exited_at >= SB_CMDS_GRACE_MS)) {
            s_close(&c->in);
            s_close(&c->out);
            s_close(&c->err);
            c->phase = DONE;
        }
    }
    s_trim(m);
}

static void *
s_thread(void *arg)
{
    sb_cmds_t *m = arg;
    struct pollfd *pf = xcalloc(2 + 2 * (SB_CMD_MAX + 64), sizeof *pf);
    char *rd = xmalloc(READ_CHUNK);
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        int n = 0, cap = 2 + 2 * (SB_CMD_MAX + 64);
        int64_t now = clock_mono_ms(), next = -1;
        pf[n++] = (struct pollfd){.fd = m->wake, .events = POLLIN};
        if (!m->gone)
            pf[n++] = (struct pollfd){.fd = m->e->ops->fd(m->e->self),
                                      .events = POLLIN};
        for (struct s_cmd *c = m->cmds; c && n + 2 <= cap; c = c->next) {
            if (c->out >= 0)
                pf[n++] = (struct pollfd){.fd = c->out, .events = POLLIN};
            if (c->err >= 0)
                pf[n++] = (struct pollfd){.fd = c->err, .events = POLLIN};
            int64_t t = -1;
            if (c->phase == RUNNING && c->deadline && !c->timed_out)
                t = c->deadline;
            if (c->phase == EXITED)
                t = c->exited_at + SB_CMDS_GRACE_MS;
            if (t >= 0 && (next < 0 || t < next))
                next = t;
        }
        int wait = next < 0 ? -1 : (int)(next > now ? next - now : 0);
        pthread_mutex_unlock(&m->mu);
        int pr = poll(pf, (nfds_t)n, wait);
        pthread_mutex_lock(&m->mu);
        if (pr < 0 && errno != EINTR)
            break;
        uint64_t v;
        if (pr > 0 && (pf[0].revents & POLLIN) &&
            read(m->wake, &v, sizeof v) < 0) { /* drained either way */
        }
        if (!m->gone) {
            sb_proc_event_t ev;
            int r;
            while ((r = m->e->ops->next_event(m->e->self, &ev)) > 0)
                s_event(m, &ev);
            if (r < 0)
                m->gone = true;
        }
        for (int i = 1; pr > 0 && i < n; i++) {
            if (!pf[i].revents)
                continue;
            for (struct s_cmd *c = m->cmds; c; c = c->next) {
                int *fd = c->out == pf[i].fd   ? &c->out
                          : c->err == pf[i].fd ? &c->err
                                               : NULL;
                if (!fd)
                    continue;
                int stream = c->pty ? SB_CMDS_PTY : fd == &c->out ? 1 : 2;
                ssize_t got = read(*fd, rd, READ_CHUNK);
                if (got > 0)
                    s_append(m, c, stream, rd, (size_t)got);
                else if (got == 0 || (errno != EAGAIN && errno != EINTR))
                    s_close(fd);
                break;
            }
        }
        s_settle(m, clock_mono_ms());
        pthread_cond_broadcast(&m->cv);
    }
    pthread_mutex_unlock(&m->mu);
    free(rd);
    free(pf);
    return NULL;
}

sb_cmds_t *
sb_cmds_new(sb_proc_engine_t **engine, const sb_cmds_limits_t *lim, err_t *err)
{
    sb_cmds_t *m = xcalloc(1, sizeof *m);
    m->e = *engine;
    *engine = NULL;
    if (lim)
        m->lim = *lim;
    if (!m->lim.max_output)
        m->lim.max_output = SB_CMDS_DEFAULT_OUTPUT;
    if (!m->lim.max_kept)
        m->lim.max_kept = 16;
    m->next_id = 1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    m->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->wake < 0) {
        err_errno(err, ERR_SANDBOX, "command: eventfd");
        sb_cmds_destroy(&m);
        return NULL;
    }
    /* The thread must not take the caller's Ctrl-C. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&m->thread, NULL, s_thread, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        err_errno(err, ERR_SANDBOX, "command: start the reader thread");
        sb_cmds_destroy(&m);
        return NULL;
    }
    m->thread_started = true;
    return m;
}

void
sb_cmds_destroy(sb_cmds_t **pp)
{
    if (!pp || !*pp)
        return;
    sb_cmds_t *m = *pp;
    *pp = NULL;
    pthread_mutex_lock(&m->mu);
    for (struct s_cmd *c = m->cmds; c; c = c->next)
        s_kill(m, c);
    m->stop = true;
    pthread_mutex_unlock(&m->mu);
    if (m->thread_started) {
        s_wake(m);
        pthread_join(m->thread, NULL);
    }
    while (m->cmds) {
        struct s_cmd *c = m->cmds;
        m->cmds = c->next;
        s_free_cmd(c);
    }
    if (m->wake >= 0)
        close(m->wake);
    sb_proc_engine_destroy(&m->e);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

bool
sb_cmds_alive(sb_cmds_t *m)
{
    pthread_mutex_lock(&m->mu);
    bool alive = !m->gone;
    pthread_mutex_unlock(&m->mu);
    return alive;
}

/* Wait on cv until `deadline` (monotonic ms, < 0 forever); false when it
 * passed. */
static bool
s_wait(sb_cmds_t *m, int64_t deadline)
{
    if (deadline < 0) {
        pthread_cond_wait(&m->cv, &m->mu);
        return true;
    }
    int64_t now = clock_mono_ms();
    if (now >= deadline)
        return false;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (deadline - now) % 1000 * 1000000;
    ts.tv_sec += (deadline - now) / 1000 + ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    return true;
}

static int
s_pipe(int p[2], err_t *err)
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_errno(err, ERR_SANDBOX, "command: pipe");
    return 0;
}

/* A pty pair for a terminal command: p[0] the master (ours: read, write
 * with O_NONBLOCK), p[1] the slave (the command's). Both close-on-exec,
 * the slave never our controlling terminal. */
static int
s_pty(int p[2], unsigned short cols, unsigned short rows, err_t *err)
{
    char name[64];
    p[0] = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (p[0] < 0 || grantpt(p[0]) < 0 || unlockpt(p[0]) < 0 ||
        ptsname_r(p[0], name, sizeof name) != 0)
        return err_errno(err, ERR_SANDBOX, "command: a terminal (pty)");
    p[1] = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (p[1] < 0)
        return err_errno(err, ERR_SANDBOX, "command: opening %s", name);
    struct winsize ws = {.ws_col = cols, .ws_row = rows};
    ioctl(p[0], TIOCSWINSZ, &ws);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    return 0;
}

int
sb_cmds_start(sb_cmds_t *m, const sb_cmd_opts_t *o, unsigned *id, int *pid,
              err_t *err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, rc = -1;
    int tty[2] = {-1, -1};
    bool pty = o->pty_cols && o->pty_rows;
    if (!o->argv || !o->argv[0])
        return err_set(err, ERR_USAGE, "command: nothing to run");
    if (pty ? s_pty(tty, o->pty_cols, o->pty_rows, err) < 0
            : s_pipe(in, err) < 0 || s_pipe(out, err) < 0 ||
                  s_pipe(er, err) < 0)
        goto out;
    if (pty) { /* the master is both ends of ours, the slave all three */
        out[0] = tty[0];
        in[1] = fcntl(tty[0], F_DUPFD_CLOEXEC, 3);
        in[0] = tty[1];
        out[1] = fcntl(tty[1], F_DUPFD_CLOEXEC, 3);
        er[1] = fcntl(tty[1], F_DUPFD_CLOEXEC, 3);
        tty[0] = tty[1] = -1;
        if (in[1] < 0 || out[1] < 0 || er[1] < 0) {
            err_errno(err, ERR_SANDBOX, "command: dup");
            goto out;
        }
    } else {
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        fcntl(er[0], F_SETFL, O_NONBLOCK);
    }
    pthread_mutex_lock(&m->mu);
    if (m->gone || m->stop) {
        pthread_mutex_unlock(&m->mu);
        err_set(err, ERR_SANDBOX,
                "command: the box has ended; start a new one first");
        goto out;
    }
    struct s_cmd *c = xcalloc(1, sizeof *c);
    c->id = m->next_id++;
    c->phase = STARTING;
    c->tag = o->tag ? xstrdup(o->tag) : NULL;
    size_t na = 0;
    for (char *const *a = o->argv; *a; a++)
        strv_push(&c->argv, &na, xstrdup(*a));
    c->cwd = xstrdup(o->cwd ? o->cwd : SB_HOME_PATH);
    c->cap = o->max_output && o->max_output < m->lim.max_output
                 ? o->max_output
                 : m->lim.max_output;
    buf_init(&c->log, 0);
    int t = o->timeout_ms;
    if (m->lim.max_timeout_ms > 0 && (t <= 0 || t > m->lim.max_timeout_ms))
        t = m->lim.max_timeout_ms;
    c->timeout_ms = t > 0 ? t : 0;
    c->pty = pty;
    /* A terminal's input stays open: closing it would hang up the
     * terminal, not send EOF. */
    c->in = o->stdin_open || pty ? in[1] : -1;
    c->out = out[0];
    c->err = er[0];
    if (!o->stdin_open && !pty)
        close(in[1]);
    in[1] = out[0] = er[0] = -1;
    sb_proc_spec_t spec = {.argv = o->argv,
                           .envp = o->envp,
                           .cwd = c->cwd,
                           .stdio = {in[0], out[1], er[1]},
                           .ctty = pty};
    if (m->e->ops->start(m->e->self, c->id, &spec, err) < 0) {
        pthread_mutex_unlock(&m->mu);
        s_free_cmd(c);
        goto out;
    }
    c->next = m->cmds;
    m->cmds = c;
    unsigned my = c->id;
    s_wake(m);
    int64_t deadline = clock_mono_ms() + START_TIMEOUT_MS;
    while ((c = s_find(m, my)) && c->phase == STARTING && !m->gone)
        if (!s_wait(m, deadline))
            break;
    if (!c) {
        err_set(err, ERR_SANDBOX, "command: lost while starting");
    } else if (c->failed) {
        rc = err ? (*err = c->start_err, -1) : -1;
    } else if (c->phase == STARTING) {
        err_set(err, ERR_SANDBOX,
                "command: the box did not start it within %d s",
                START_TIMEOUT_MS / 1000);
        c->failed = true;
        c->phase = DONE;
    } else {
        if (c->timeout_ms) {
            c->deadline = clock_mono_ms() + c->timeout_ms;
            s_wake(m); /* the thread's poll must wake up for it */
        }
        *id = my;
        if (pid)
            *pid = c->pid;
        rc = 0;
    }
    if (rc < 0 && c) { /* nothing to follow: forget it */
        for (struct s_cmd **pc = &m->cmds; *pc; pc = &(*pc)->next)
            if (*pc == c) {
                *pc = c->next;
                s_free_cmd(c);
                break;
            }
    }
    pthread_mutex_unlock(&m->mu);
out:
    for (int i = 0; i < 2; i++) {
        if (tty[i] >= 0)
            close(tty[i]);
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
        if (er[i] >= 0)
            close(er[i]);
    }
    return rc;
}

unsigned
sb_cmds_find(sb_cmds_t *m, int pid, const char *tag)
{
    unsigned id = 0;
    pthread_mutex_lock(&m->mu);
    for (struct s_cmd *c = m->cmds; c && !id; c = c->next) {
        if (c->failed)
            continue;
        if (tag ? (c->tag && strcmp(c->tag, tag) == 0) : c->pid == pid)
            id = c->id;
    }
    pthread_mutex_unlock(&m->mu);
    return id;
}

int
sb_cmds_signal(sb_cmds_t *m, unsigned id, int sig, err_t *err)
{
    int rc;
    pthread_mutex_lock(&m->mu);
    struct s_cmd *c = s_find(m, id);
    if (!c || c->phase != RUNNING || m->gone)
        rc = err_set(err, ERR_USAGE, "command %u is not running", id);
    else
        rc = m->e->ops->signal(m->e->self, id, sig, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int
sb_cmds_write(sb_cmds_t *m, unsigned id, const void *data, size_t len,
              err_t *err)
{
    pthread_mutex_lock(&m->mu);
    struct s_cmd *c = s_find(m, id);
    int fd = c && c->in >= 0 ? fcntl(c->in, F_DUPFD_CLOEXEC, 3) : -1;
    pthread_mutex_unlock(&m->mu);
    if (fd < 0)
        return err_set(err, ERR_USAGE,
                       "command %u: stdin is not open (it ended, or was "
                       "started without stdin)",
                       id);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    const char *p = data;
    int64_t deadline = clock_mono_ms() + 5000;
    int rc = 0;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            rc = err_errno(err, ERR_IO, "command %u: writing stdin", id);
            break;
        }
        int64_t left = deadline - clock_mono_ms();
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (left <= 0 || poll(&pf, 1, (int)left) == 0) {
            rc = err_set(err, ERR_TIMEOUT,
                         "command %u: stdin still full after 5 s (it does "
                         "not read)",
                         id);
            break;
        }
    }
    close(fd);
    return rc;
}

int
sb_cmds_resize(sb_cmds_t *m, unsigned id, unsigned short cols,
               unsigned short rows, err_t *err)
{
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    struct s_cmd *c = s_find(m, id);
    struct winsize ws = {.ws_col = cols, .ws_row = rows};
    if (!c || !c->pty || c->phase != RUNNING || c->out < 0)
        rc = err_set(err, ERR_USAGE,
                     "command %u is not a running terminal command", id);
    else if (!cols || !rows)
        rc = err_set(err, ERR_USAGE, "a terminal needs columns and rows");
    else if (ioctl(c->out, TIOCSWINSZ, &ws) < 0)
        rc = err_errno(err, ERR_IO, "command %u: resizing its terminal", id);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int
sb_cmds_close_stdin(sb_cmds_t *m, unsigned id, err_t *err)
{
    pthread_mutex_lock(&m->mu);
    struct s_cmd *c = s_find(m, id);
    if (c)
        s_close(&c->in);
    pthread_mutex_unlock(&m->mu);
    return c ? 0 : err_set(err, ERR_USAGE, "no command %u", id);
}

json_t *
sb_cmds_list(sb_cmds_t *m)
{
    json_t *a = json_array();
    pthread_mutex_lock(&m->mu);
    for (struct s_cmd *c = m->cmds; c; c = c->next) {
        if (c->phase != RUNNING)
            continue;
        json_t *argv = json_array();
        for (char **p = c->argv; p && *p; p++)
            json_array_append_new(argv, json_string(*p));
        json_array_append_new(
            a, json_pack("{s:I, s:i, s:o, s:o, s:s}", "id", (json_int_t)c->id,
                         "pid", c->pid, "tag",
                         c->tag ? json_string(c->tag) : json_null(), "argv",
                         argv, "cwd", c->cwd));
    }
    pthread_mutex_unlock(&m->mu);
    return a;
}

static void
s_describe(const struct s_cmd *c, sb_cmd_end_t *e)
{
    memset(e, 0, sizeof *e);
    int st = c->status;
    e->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    e->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    e->timed_out = c->timed_out;
    e->capped = c->capped;
    e->box_gone = c->box_gone;
    if (c->box_gone)
        snprintf(e->why, sizeof e->why, "killed: the box ended");
    else if (c->timed_out)
        snprintf(e->why, sizeof e->why,
                 "timed out after %d ms (killed); raise the timeout",
                 c->timeout_ms);
    else if (c->capped)
        snprintf(e->why, sizeof e->why,
                 "output limit of %zu bytes reached (killed); write large "
                 "output to a file",
                 c->cap);
    else if (e->signal)
        snprintf(e->why, sizeof e->why, "killed by signal %d (%s)", e->signal,
                 strsignal(e->signal));
    else
        snprintf(e->why, sizeof e->why, "exited with status %d", e->exit_code);
}

int
sb_cmds_next(sb_cmds_t *m, unsigned id, size_t *cursor, int timeout_ms,
             int *stream, char **data, size_t *len, sb_cmd_end_t *end)
{
    int64_t deadline = timeout_ms < 0 ? -1 : clock_mono_ms() + timeout_ms;
    int rc = SB_CMDS_WAIT;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        struct s_cmd *c = s_find(m, id);
        if (!c) {
            rc = SB_CMDS_UNKNOWN;
            break;
        }
        if (*cursor + 5 <= c->log.len) {
            unsigned char *h = (unsigned char *)c->log.data + *cursor;
            uint32_t l;
            memcpy(&l, h + 1, 4);
            *stream = h[0];
            *len = l;
            *data = xmalloc(l + 1);
            memcpy(*data, h + 5, l);
            (*data)[l] = '\0';
            *cursor += 5 + l;
            rc = SB_CMDS_DATA;
            break;
        }
        if (c->phase == DONE) {
            if (end)
                s_describe(c, end);
            rc = SB_CMDS_END;
            break;
        }
        if (!s_wait(m, deadline))
            break;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

size_t
sb_cmds_cursor_now(sb_cmds_t *m, unsigned id)
{
    pthread_mutex_lock(&m->mu);
    struct s_cmd *c = s_find(m, id);
    size_t at = c ? c->log.len : 0;
    pthread_mutex_unlock(&m->mu);
    return at;
}

void
sb_cmds_forget(sb_cmds_t *m, unsigned id)
{
    pthread_mutex_lock(&m->mu);
    for (struct s_cmd **pc = &m->cmds; *pc; pc = &(*pc)->next) {
        struct s_cmd *c = *pc;
        if (c->id == id && c->phase == DONE) {
            *pc = c->next;
            s_free_cmd(c);
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
}
