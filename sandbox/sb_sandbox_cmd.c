/* sb_sandbox_cmd: pid 1's side of the command socket (sb_sandbox_impl.h).
 *
 * Pid 1 is a copy of the launcher that went on after clone: like the rest
 * of sb_sandbox_child.c this allocates nothing and takes no lock; the
 * table and the request buffer are static (private to pid 1's copy).
 * A start forks a child of pid 1 that becomes the box's user exactly as
 * the program does (sb_box_exec); pid 1 never blocks on it: whether the
 * exec worked arrives on a close-on-exec pipe it polls. A signal goes to
 * the command's process group (its own session), and only to a command
 * pid 1 has not reaped yet, so never to a recycled pid or to the
 * program. */
#include "sandbox/sb_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

enum s_slot { FREE = 0, STARTING, RUNNING };

struct s_cmd {
    enum s_slot state; /* FREE: slot unused */
    uint32_t id;       /* the launcher's name for it */
    pid_t pid;         /* in the box */
    int ep;            /* STARTING: read end of its exec-error pipe */
};

static struct s_cmd s_cmds[SB_CMD_MAX];
static char s_req[SB_CMD_REQ_MAX];
static char *s_strs[SB_CMD_STRS_MAX + 3];
static bool s_closed; /* the launcher closed the command socket */

static void
s_send(const struct s_child *c, uint32_t type, uint32_t id, int pid, int status,
       int errnum, int code, const char *text)
{
    struct s_cmd_ev ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.id = id;
    ev.pid = pid;
    ev.status = status;
    ev.errnum = errnum;
    ev.code = code;
    for (size_t i = 0; text && text[i] && i + 1 < sizeof ev.text; i++)
        ev.text[i] = text[i];
    while (send(c->cmd, &ev, sizeof ev, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

int
sb_box_cmd_fds(const struct s_child *c, struct pollfd *pf, int max)
{
    int n = 0;
    if (c->cmd >= 0 && !s_closed && n < max) {
        pf[n].fd = c->cmd;
        pf[n++].events = POLLIN;
    }
    for (int i = 0; i < SB_CMD_MAX && n < max; i++)
        if (s_cmds[i].state == STARTING) {
            pf[n].fd = s_cmds[i].ep;
            pf[n++].events = POLLIN;
        }
    return n;
}

/* The exec-error pipe of a STARTING command is readable (or it was
 * reaped, so it is): it exec'ed (EOF) or reports why not. */
static void
s_settle(const struct s_child *c, struct s_cmd *k)
{
    struct s_msg m;
    ssize_t n;
    while ((n = read(k->ep, &m, sizeof m)) < 0 && errno == EINTR)
        ;
    close(k->ep);
    k->ep = -1;
    if (n == (ssize_t)sizeof m) {
        m.text[sizeof m.text - 1] = '\0';
        s_send(c, CMD_FAILED, k->id, 0, 0, m.errnum, m.code, m.text);
        k->state = FREE; /* its exit (status 127) is not reported */
        return;
    }
    k->state = RUNNING;
    s_send(c, CMD_STARTED, k->id, k->pid, 0, 0, 0, NULL);
}

/* Check a start request in s_req (n bytes) and point s_strs at its
 * strings: cwd, argv..., NULL, envp..., NULL. Returns 0 or -1. */
static int
s_parse(size_t n, const struct s_cmd_req **out)
{
    const struct s_cmd_req *r = (const struct s_cmd_req *)(void *)s_req;
    if (n < sizeof *r || r->len != n - sizeof *r || r->argc < 1 ||
        r->argc > SB_CMD_STRS_MAX || r->envc > SB_CMD_STRS_MAX - r->argc)
        return -1;
    char *p = s_req + sizeof *r, *end = s_req + n;
    uint32_t want = 1 + r->argc + r->envc, k = 0;
    for (uint32_t i = 0; i < want; i++) {
        char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
        if (!nul)
            return -1;
        s_strs[k++] = p;
        if (i == r->argc) /* after cwd and argv */
            s_strs[k++] = NULL;
        p = nul + 1;
    }
    s_strs[k] = NULL;
    if (p != end || s_strs[0][0] != '/')
        return -1;
    *out = r;
    return 0;
}

static void
s_start(const struct s_child *c, const struct s_cmd_req *r, int fds[3])
{
    struct s_cmd *k = NULL;
    for (int i = 0; i < SB_CMD_MAX && !k; i++)
        if (s_cmds[i].state == FREE)
            k = &s_cmds[i];
    if (!k) {
        s_send(c, CMD_FAILED, r->id, 0, 0, EAGAIN, ERR_SANDBOX,
               "start: too many commands running in this box");
        return;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        s_send(c, CMD_FAILED, r->id, 0, 0, errno, ERR_SANDBOX, "pipe");
        return;
    }
    pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        close(ep[0]);
        struct s_exec x = {.argv = s_strs + 1,
                           .envp = s_strs + 2 + r->argc,
                           .cwd = s_strs[0],
                           .stdio = fds,
                           .ctty = (r->flags & SB_CMD_F_CTTY) != 0,
                           .path = (r->flags & SB_CMD_F_PATH) != 0};
        sb_box_exec(c, &x, ep[1], -1);
    }
    int e = errno;
    close(ep[1]);
    if (pid < 0) {
        close(ep[0]);
        s_send(c, CMD_FAILED, r->id, 0, 0, e, ERR_SANDBOX,
               "fork the command (the box's process limit?)");
        return;
    }
    *k =
        (struct s_cmd){.state = STARTING, .id = r->id, .pid = pid, .ep = ep[0]};
}

static void
s_signal(const struct s_cmd_req *r)
{
    if (r->sig <= 0 || r->sig >= NSIG)
        return;
    for (int i = 0; i < SB_CMD_MAX; i++) {
        struct s_cmd *k = &s_cmds[i];
        if (k->state == FREE || k->id != r->id)
            continue;
        /* Its own session and group once it ran setsid; before that,
         * the process alone. */
        if (kill(-k->pid, r->sig) < 0)
            kill(k->pid, r->sig);
    }
}

static void
s_request(const struct s_child *c)
{
    int fds[3] = {-1, -1, -1}, nfd = 0;
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = s_req, .iov_len = sizeof s_req};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    ssize_t n;
    while ((n = recvmsg(c->cmd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN)
            s_closed = true;
        return;
    }
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
            if (nfd < 3)
                fds[nfd++] = fd;
            else
                close(fd);
        }
    }
    const struct s_cmd_req *r = (const struct s_cmd_req *)(void *)s_req;
    if ((size_t)n >= sizeof *r && r->type == CMD_SIGNAL)
        s_signal(r);
    else if ((size_t)n >= sizeof *r && r->type == CMD_START) {
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || nfd != 3 ||
            s_parse((size_t)n, &r) < 0)
            s_send(c, CMD_FAILED, r->id, 0, 0, EINVAL, ERR_USAGE,
                   "start: malformed request");
        else
            s_start(c, r, fds);
    }
    for (int i = 0; i < nfd; i++)
        close(fds[i]);
}

void
sb_box_cmd_ready(const struct s_child *c, const struct pollfd *pf, int n)
{
    /* The pipes first: a start handled below may reuse a closed one's fd
     * number, which a later entry of pf would then wrongly name. */
    short cmd_revents = 0;
    for (int i = 0; i < n; i++) {
        if (pf[i].fd == c->cmd) {
            cmd_revents = pf[i].revents;
            continue;
        }
        for (int j = 0; pf[i].revents && j < SB_CMD_MAX; j++)
            if (s_cmds[j].state == STARTING && s_cmds[j].ep == pf[i].fd)
                s_settle(c, &s_cmds[j]);
    }
    if (cmd_revents & POLLIN)
        s_request(c);
    else if (cmd_revents)
        s_closed = true; /* hung up: nobody to answer */
}

void
sb_box_cmd_reaped(const struct s_child *c, pid_t pid, int status)
{
    for (int i = 0; i < SB_CMD_MAX; i++) {
        struct s_cmd *k = &s_cmds[i];
        if (k->state == FREE || k->pid != pid)
            continue;
        if (k->state == STARTING)
            s_settle(c, k); /* its pipe is complete now */
        if (k->state == RUNNING)
            s_send(c, CMD_EXITED, k->id, pid, status, 0, 0, NULL);
        k->state = FREE;
    }
}
