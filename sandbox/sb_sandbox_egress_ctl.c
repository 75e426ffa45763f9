/*
 * sb_sandbox_egress_ctl: the launcher's two channels to a box's egress
 * proxy (sb_sandbox_egress.c starts the proxy).
 *   rules    a socketpair: our end stays in the launcher (close-on-exec,
 *            never passed to the box, whose every fd is closed before it
 *            runs anything), the proxy's is its fd 6. A line replaces the
 *            rules; the proxy answers "+" once they are in force.
 *   records  a pipe: the proxy (nobody, no file open) writes one JSON line
 *            per connection on its fd 5; a thread here appends each to
 *            --net-log and hands it to the policy's net_record_fn (the
 *            --audit log). The proxy parses what the box sends, so what
 *            it writes is read as hostile too: lines are capped, must be
 *            JSON objects, and only reach the file and the hook.
 */
#include "sandbox/sb_egress_rule.h"
#include "sandbox/sb_sandbox.h"

#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

#define S_LINE_MAX (16 * 1024) /* a record longer than this is dropped */
#define S_ACK_MS 5000          /* the proxy answers a rules line within */

/* The record reader: its thread, and what it writes to. */
struct sb_egress_rx {
    pthread_t thread;
    int fd;      /* owned: the record pipe's read end */
    int stop[2]; /* owned: a byte on stop[1] ends the thread */
    int log_fd;  /* owned: --net-log, or -1 */
    void (*fn)(void *arg, const json_t *rec); /* or NULL */
    void *arg;
};

static void
s_rx_line(struct sb_egress_rx *rx, char *line, size_t n)
{
    if (rx->log_fd >= 0) {
        line[n] = '\n';
        ssize_t w = write(rx->log_fd, line, n + 1); /* O_APPEND: one write */
        (void)w;
    }
    if (!rx->fn)
        return;
    json_t *j = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
    if (json_is_object(j))
        rx->fn(rx->arg, j);
    json_decref(j);
}

static void *
s_rx_thread(void *arg)
{
    struct sb_egress_rx *rx = arg;
    char *buf = xmalloc(S_LINE_MAX + 1);
    size_t have = 0;
    bool dropping = false; /* inside a line too long to keep */
    bool stopping = false;
    for (;;) {
        struct pollfd pf[2] = {{.fd = rx->fd, .events = POLLIN},
                               {.fd = rx->stop[0], .events = POLLIN}};
        /* Once told to stop: what is already in the pipe, then out. */
        int pr = poll(pf, stopping ? 1 : 2, stopping ? 0 : -1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0 || (stopping && pr == 0))
            break;
        if (!stopping && pf[1].revents) {
            stopping = true;
            continue;
        }
        if (!pf[0].revents)
            continue;
        ssize_t n = read(rx->fd, buf + have, S_LINE_MAX - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the proxy ended */
        have += (size_t)n;
        char *nl;
        while ((nl = memchr(buf, '\n', have))) {
            size_t len = (size_t)(nl - buf);
            if (!dropping)
                s_rx_line(rx, buf, len); /* writes buf[len]: still ours */
            dropping = false;
            memmove(buf, nl + 1, have - len - 1);
            have -= len + 1;
        }
        if (have == S_LINE_MAX) {
            have = 0;
            dropping = true;
        }
    }
    free(buf);
    return NULL;
}

int
sb_box_egress_ctl_open(sb_sandbox_t *sb, int fds[4], err_t *err)
{
    const sb_policy_t *p = &sb->policy;
    fds[0] = fds[1] = fds[2] = fds[3] = -1;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return err_errno(err, ERR_SANDBOX, "--allow-net: the rules socket");
    fds[0] = sp[0];
    fds[1] = sp[1];
    if (p->net_log || p->net_record_fn) {
        int pp[2];
        if (pipe2(pp, O_CLOEXEC) < 0) {
            err_errno(err, ERR_SANDBOX, "--allow-net: the record pipe");
            goto fail;
        }
        fds[2] = pp[0];
        fds[3] = pp[1];
    }
    return 0;
fail:
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return -1;
}

int
sb_box_egress_ctl_started(sb_sandbox_t *sb, int fds[4], err_t *err)
{
    const sb_policy_t *p = &sb->policy;
    int rc = -1;
    close(fds[1]);
    if (fds[3] >= 0)
        close(fds[3]);
    fds[1] = fds[3] = -1;
    pthread_mutex_lock(&sb->egress_mu);
    sb->egress_rules = fds[0];
    fds[0] = -1;
    pthread_mutex_unlock(&sb->egress_mu);
    if (fds[2] < 0)
        return 0;
    struct sb_egress_rx *rx = xcalloc(1, sizeof *rx);
    rx->fd = fds[2];
    fds[2] = -1;
    rx->stop[0] = rx->stop[1] = rx->log_fd = -1;
    rx->fn = p->net_record_fn;
    rx->arg = p->net_record_arg;
    if (p->net_log) {
        rx->log_fd =
            open(p->net_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (rx->log_fd < 0) {
            err_errno(err, ERR_IO, "--net-log: cannot open %s", p->net_log);
            goto out;
        }
    }
    if (pipe2(rx->stop, O_CLOEXEC) < 0) {
        err_errno(err, ERR_SANDBOX, "--allow-net: pipe");
        goto out;
    }
    /* No signal for this thread: the launcher's own handling (a
     * signalfd, sigwait) must keep getting every one. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&rx->thread, NULL, s_rx_thread, rx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        errno = e;
        err_errno(err, ERR_SANDBOX, "--allow-net: the record thread");
        goto out;
    }
    sb->egress_rx = rx;
    rx = NULL;
    rc = 0;
out:
    if (rx) {
        close(rx->fd);
        for (int i = 0; i < 2; i++)
            if (rx->stop[i] >= 0)
                close(rx->stop[i]);
        if (rx->log_fd >= 0)
            close(rx->log_fd);
        free(rx);
    }
    return rc;
}

void
sb_box_egress_ctl_stop(sb_sandbox_t *sb)
{
    pthread_mutex_lock(&sb->egress_mu);
    if (sb->egress_rules >= 0)
        close(sb->egress_rules);
    sb->egress_rules = -1;
    pthread_mutex_unlock(&sb->egress_mu);
    struct sb_egress_rx *rx = sb->egress_rx;
    sb->egress_rx = NULL;
    if (!rx)
        return;
    ssize_t w = write(rx->stop[1], "x", 1);
    (void)w;
    pthread_join(rx->thread, NULL);
    close(rx->fd);
    close(rx->stop[0]);
    close(rx->stop[1]);
    if (rx->log_fd >= 0)
        close(rx->log_fd);
    free(rx);
}

const char *
sb_box_egress_rules_now(sb_sandbox_t *sb)
{
    return sb->net_rules ? sb->net_rules : sb->policy.allow_net;
}

/* Send `line` (with its newline) and wait for the proxy's answer. */
static int
s_send_rules(int fd, const char *line, size_t n, err_t *err)
{
    size_t at = 0;
    while (at < n) {
        ssize_t w = send(fd, line + at, n - at, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return err_errno(err, ERR_SANDBOX,
                             "--allow-net: the box's proxy has ended");
        at += (size_t)w;
    }
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    char a = 0;
    int pr;
    while ((pr = poll(&pf, 1, S_ACK_MS)) < 0 && errno == EINTR)
        ;
    if (pr <= 0 || read(fd, &a, 1) != 1)
        return err_set(err, ERR_SANDBOX,
                       "--allow-net: the box's proxy did not take the new "
                       "rules within %d s",
                       S_ACK_MS / 1000);
    if (a != '+')
        return err_set(err, ERR_SANDBOX,
                       "--allow-net: the box's proxy refused the new rules");
    return 0;
}

int
sb_net_rules_check(const char *rules, err_t *err)
{
    if (!rules)
        return err_set(err, ERR_USAGE, "--allow-net: no rules given");
    if (strpbrk(rules, "\r\n"))
        return err_set(err, ERR_USAGE, "--allow-net: a rule with a newline");
    if (!*rules)
        return 0;
    sb_egress_rules_t *rs = xcalloc(1, sizeof *rs);
    int r = sb_egress_rules_parse(rs, rules, err);
    free(rs);
    return r;
}

int
sb_sandbox_set_net_rules(sb_sandbox_t *sb, const char *rules, err_t *err)
{
    if (!sb->policy.allow_net)
        return err_set(err, ERR_USAGE,
                       "this box was started without --allow-net, so it has "
                       "no egress proxy whose rules could change; start the "
                       "session with --allow-net (rules may then change)");
    if (sb_net_rules_check(rules, err) < 0)
        return -1;
    size_t n = strlen(rules);
    char *line = xmalloc(n + 2);
    memcpy(line, rules, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    int rc = 0;
    pthread_mutex_lock(&sb->egress_mu);
    if (sb->egress_rules >= 0)
        rc = s_send_rules(sb->egress_rules, line, n + 1, err);
    if (rc == 0) {
        free(sb->net_rules);
        sb->net_rules = xstrdup(rules);
    }
    pthread_mutex_unlock(&sb->egress_mu);
    free(line);
    return rc;
}

char *
sb_sandbox_net_rules(sb_sandbox_t *sb)
{
    if (!sb->policy.allow_net)
        return NULL;
    pthread_mutex_lock(&sb->egress_mu);
    char *r = xstrdup(sb_box_egress_rules_now(sb));
    pthread_mutex_unlock(&sb->egress_mu);
    return r;
}
