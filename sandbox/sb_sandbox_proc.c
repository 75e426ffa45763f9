/* sb_sandbox_proc: the namespace engine of sb_proc.h, the launcher's side
 * of the command socket (pid 1's is sb_sandbox_cmd.c; the messages are in
 * sb_sandbox_impl.h). Nothing the box sends is trusted beyond its size:
 * ids are the caller's to check, texts are cut and terminated here. */
#include "sandbox/sb_proc.h"

#include "common/xalloc.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

struct s_eng {
    int fd; /* owned: a copy of the box's command socket */
};

static int
s_add(char *buf, size_t *at, const char *s)
{
    size_t n = strlen(s) + 1;
    if (*at + n > SB_CMD_REQ_MAX)
        return -1;
    memcpy(buf + *at, s, n);
    *at += n;
    return 0;
}

static int
s_start(void *self, unsigned id, const sb_proc_spec_t *spec, err_t *err)
{
    struct s_eng *e = self;
    static char *const no_env[] = {NULL};
    char *const *envp = spec->envp ? spec->envp : no_env;
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return err_set(err, ERR_USAGE, "command: no program to run");
    const char *cwd = spec->cwd ? spec->cwd : SB_HOME_PATH;
    if (cwd[0] != '/')
        return err_set(err, ERR_USAGE,
                       "command: the working directory must be an absolute "
                       "path inside the box (got '%s')",
                       cwd);
    char *buf = xmalloc(SB_CMD_REQ_MAX);
    struct s_cmd_req r = {.type = CMD_START, .id = id};
    size_t at = sizeof r;
    int bad = s_add(buf, &at, cwd);
    for (char *const *a = spec->argv; *a && !bad; a++, r.argc++)
        bad = s_add(buf, &at, *a) || r.argc >= SB_CMD_STRS_MAX;
    for (char *const *a = envp; *a && !bad; a++, r.envc++)
        bad = s_add(buf, &at, *a) || r.argc + r.envc >= SB_CMD_STRS_MAX;
    if (bad) {
        free(buf);
        return err_set(err, ERR_USAGE,
                       "command: the command line and environment exceed "
                       "%d bytes or %d strings; shorten them",
                       SB_CMD_REQ_MAX, SB_CMD_STRS_MAX);
    }
    r.len = (uint32_t)(at - sizeof r);
    r.flags = (spec->ctty ? SB_CMD_F_CTTY : 0) |
              (strchr(spec->argv[0], '/') ? 0 : SB_CMD_F_PATH);
    memcpy(buf, &r, sizeof r);
    union {
        char b[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {.iov_base = buf, .iov_len = at};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.b,
                        .msg_controllen = sizeof cm.b};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(3 * sizeof(int));
    memcpy(CMSG_DATA(c), spec->stdio, 3 * sizeof(int));
    ssize_t n;
    while ((n = sendmsg(e->fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    free(buf);
    if (n != (ssize_t)at)
        return err_errno(err, ERR_SANDBOX,
                         "command: cannot reach the box (it has ended?)");
    return 0;
}

static int
s_signal(void *self, unsigned id, int sig, err_t *err)
{
    struct s_eng *e = self;
    struct s_cmd_req r = {.type = CMD_SIGNAL, .id = id, .sig = sig};
    ssize_t n;
    while ((n = send(e->fd, &r, sizeof r, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof r)
        return err_errno(err, ERR_SANDBOX,
                         "command: cannot reach the box (it has ended?)");
    return 0;
}

static int
s_fd(void *self)
{
    return ((struct s_eng *)self)->fd;
}

static int
s_next(void *self, sb_proc_event_t *ev)
{
    struct s_eng *e = self;
    struct s_cmd_ev m;
    ssize_t n;
    while ((n = recv(e->fd, &m, sizeof m, MSG_DONTWAIT)) < 0 && errno == EINTR)
        ;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n <= 0)
        return -1;
    if (n != (ssize_t)sizeof m ||
        (m.type != CMD_STARTED && m.type != CMD_FAILED && m.type != CMD_EXITED))
        return 0; /* not ours to believe: dropped */
    memset(ev, 0, sizeof *ev);
    ev->kind = m.type == CMD_STARTED  ? SB_PROC_STARTED
               : m.type == CMD_FAILED ? SB_PROC_FAILED
                                      : SB_PROC_EXITED;
    ev->id = m.id;
    ev->pid = m.pid;
    ev->status = m.status;
    ev->code = m.code == ERR_USAGE ? ERR_USAGE : ERR_SANDBOX;
    m.text[sizeof m.text - 1] = '\0';
    for (char *p = m.text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    if (m.type == CMD_FAILED)
        snprintf(ev->text, sizeof ev->text, "%s: %s", m.text,
                 strerror(m.errnum > 0 && m.errnum < 4096 ? m.errnum : EIO));
    return 1;
}

static void
s_destroy(void *self)
{
    struct s_eng *e = self;
    if (e->fd >= 0)
        close(e->fd);
    free(e);
}

static const sb_proc_ops_t s_ops = {
    .name = "namespaces",
    .start = s_start,
    .signal = s_signal,
    .fd = s_fd,
    .next_event = s_next,
    .destroy = s_destroy,
};

sb_proc_engine_t *
sb_proc_engine_on_fd(int fd)
{
    struct s_eng *e = xcalloc(1, sizeof *e);
    e->fd = fd;
    sb_proc_engine_t *eng = xcalloc(1, sizeof *eng);
    eng->ops = &s_ops;
    eng->self = e;
    return eng;
}

int
sb_sandbox_cmd_socket(const sb_sandbox_t *sb)
{
    return sb->state == ST_RUNNING ? sb->cmd : -1;
}

sb_proc_engine_t *
sb_sandbox_proc_engine(sb_sandbox_t *sb, err_t *err)
{
    if (sb->state != ST_RUNNING || sb->cmd < 0) {
        err_set(err, ERR_SANDBOX,
                "command: the box is not running; start its kernel first");
        return NULL;
    }
    int fd = fcntl(sb->cmd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
        err_errno(err, ERR_SANDBOX, "command: dup the command socket");
        return NULL;
    }
    return sb_proc_engine_on_fd(fd);
}

void
sb_proc_engine_destroy(sb_proc_engine_t **pp)
{
    if (!pp || !*pp)
        return;
    if ((*pp)->ops && (*pp)->ops->destroy)
        (*pp)->ops->destroy((*pp)->self);
    free(*pp);
    *pp = NULL;
}
