/* The messages between `serve` and its clients: one JSON object per
 * SEQPACKET, fds by SCM_RIGHTS; and where the socket lives. */
#include "kernel-bridge/pool/kb_serve.h"
#include "kernel-bridge/pool/kb_serve_impl.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
kb_serve_send(int fd, json_t *msg, const int *fds, int nfds)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return -1;
    struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * KB_SERVE_MAX_FDS)];
        struct cmsghdr align;
    } cm;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&cm, 0, sizeof cm);
        mh.msg_control = cm.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t n;
    while ((n = sendmsg(fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    free(text);
    return n < 0 ? -1 : 0;
}

/* Receive one message within timeout_ms (< 0: forever). Returns 1 with
 * *msg (new object) and up to KB_SERVE_MAX_FDS fds, 0 on hang-up, -1 on timeout
 * or a malformed message (fds received with it are closed). */
int
kb_serve_recv(int fd, int timeout_ms, json_t **msg, int *fds, int *nfds)
{
    *msg = NULL;
    *nfds = 0;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int pr;
    while ((pr = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (pr <= 0)
        return -1;
    char *buf = xmalloc(KB_SERVE_MAX_MSG + 1);
    union {
        char buf[CMSG_SPACE(sizeof(int) * KB_SERVE_MAX_FDS)];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = KB_SERVE_MAX_MSG};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    ssize_t n;
    while ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c;
         c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (*nfds < KB_SERVE_MAX_FDS)
                fds[(*nfds)++] = got;
            else
                close(got);
        }
    }
    int rc = -1;
    if (n == 0) {
        rc = 0;
    } else if (n > 0 && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        buf[n] = '\0';
        *msg = json_loads(buf, JSON_REJECT_DUPLICATES, NULL);
        if (*msg && json_is_object(*msg))
            rc = 1;
    }
    free(buf);
    if (rc != 1) {
        json_decref(*msg);
        *msg = NULL;
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
    }
    return rc;
}

void
kb_serve_close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

json_t *
kb_serve_json_strv(char *const v[])
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

char *
kb_serve_default_path(void)
{
    const char *env = getenv("JUPYTER_AGENT_SERVE_SOCKET");
    if (env && *env)
        return xstrdup(env);
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && x[0] == '/')
        return xasprintf("%s/jupyter-agent/serve.sock", x);
    const char *home = getenv("HOME");
    if (home && home[0] == '/')
        return xasprintf("%s/.cache/jupyter-agent/serve.sock", home);
    return NULL; /* never a directory others can write, such as /tmp */
}

/* The socket path to use: `path`, or the default (new string); NULL with
 * err when there is no safe default. */
char *
kb_serve_path(const char *path, err_t *err)
{
    char *p = path ? xstrdup(path) : kb_serve_default_path();
    if (!p)
        err_set(err, ERR_USAGE,
                "serve: neither XDG_RUNTIME_DIR nor HOME is set, and the "
                "socket will not go where other users can write (/tmp); "
                "set XDG_RUNTIME_DIR, HOME or JUPYTER_AGENT_SERVE_SOCKET");
    return p;
}
