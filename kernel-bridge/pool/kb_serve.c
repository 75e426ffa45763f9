/* The serve process (a pool of warm kernels behind a unix socket) and the
 * client launcher that takes one. */
#include "kernel-bridge/pool/kb_serve.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "kernel-bridge/pool/kb_pool.h"
#include "kernel-bridge/pool/kb_warm.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_proc.h"
#include "sandbox/sb_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

#define MAX_MSG (1 << 20) /* one request or reply */
#define MAX_FDS 4
#define MAX_CONNS 1024
/* Replies a client has not read yet: the socket's send buffer holds them,
 * capped here; a client that lets it fill is dropped (sends never block). */
#define CONN_SNDBUF (64 << 10)
/* Connections accepted in one poll round (the rest wait for the next). */
#define ACCEPT_BURST 256
#define TAKE_TIMEOUT_MS 10000
#define SPAWN_TIMEOUT_MS 120000 /* a restart is a cold start */

/* ---- messages: one JSON object per SEQPACKET, fds by SCM_RIGHTS ---- */

static int
s_send(int fd, json_t *msg, const int *fds, int nfds)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return -1;
    struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
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
 * *msg (new object) and up to MAX_FDS fds, 0 on hang-up, -1 on timeout or
 * a malformed message (fds received with it are closed). */
static int
s_recv(int fd, int timeout_ms, json_t **msg, int *fds, int *nfds)
{
    *msg = NULL;
    *nfds = 0;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int pr;
    while ((pr = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (pr <= 0)
        return -1;
    char *buf = xmalloc(MAX_MSG + 1);
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = MAX_MSG};
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
            if (*nfds < MAX_FDS)
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

static void
s_close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* A NULL-terminated string vector from a JSON array of strings (new), or
 * NULL if it is not one. */
static char **
s_strv(json_t *a)
{
    if (!json_is_array(a))
        return NULL;
    char **v = xcalloc(json_array_size(a) + 1, sizeof *v);
    size_t i;
    json_t *s;
    json_array_foreach(a, i, s)
    {
        if (!json_is_string(s)) {
            strv_free(v);
            return NULL;
        }
        v[i] = xstrdup(json_string_value(s));
    }
    return v;
}

static json_t *
s_json_strv(char *const v[])
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
static char *
s_path(const char *path, err_t *err)
{
    char *p = path ? xstrdup(path) : kb_serve_default_path();
    if (!p)
        err_set(err, ERR_USAGE,
                "serve: neither XDG_RUNTIME_DIR nor HOME is set, and the "
                "socket will not go where other users can write (/tmp); "
                "set XDG_RUNTIME_DIR, HOME or JUPYTER_AGENT_SERVE_SOCKET");
    return p;
}

/* ==================== server ==================== */

typedef struct s_conn {
    int fd;             /* owned connection (non-blocking) */
    kb_launcher_t *l;   /* owned taken kernel, or NULL */
    int64_t wait_until; /* a take waiting for a warm-up until this
                           (clock_mono_ms), or 0 */
    bool failed;        /* a reply could not be sent: drop the client */
} s_conn_t;

typedef struct s_server {
    kb_pool_t *pool;           /* owned */
    kb_factory_t *factory;     /* owned, or NULL; outlives the pool */
    char *kernel_name;         /* owned */
    json_t *policy_json;       /* owned: what a take must match */
    const sb_policy_t *policy; /* borrowed (the options'): the pool's, NULL
                                  for the default */
    s_conn_t conns[MAX_CONNS]; /* fd -1 = free */
    size_t nconns;             /* slots in use at the front */
    unsigned long mismatches;  /* takes for another kernel or policy */
    bool stop; /* a "stop" request arrived: nothing more is handed out; the
                  server exits once the sessions it handed out end */
} s_server_t;

/* Send a reply without blocking; a client whose unread replies fill its
 * send buffer (CONN_SNDBUF) is marked to be dropped. */
static void
s_reply(s_conn_t *c, json_t *r, const int *fds, int nfds)
{
    if (s_send(c->fd, r, fds, nfds) < 0)
        c->failed = true;
    json_decref(r);
}

/* Connections holding a taken kernel (sessions in use). */
static size_t
s_sessions(const s_server_t *sv)
{
    size_t taken = 0;
    for (size_t i = 0; i < sv->nconns; i++)
        taken += sv->conns[i].l != NULL;
    return taken;
}

/* Refuse a request with "why" + arg; returns 0 (handled). */
static int
s_reply_err(s_conn_t *c, const char *why, const char *arg, bool miss)
{
    json_t *r = json_pack("{s:b, s:b}", "ok", 0, "miss", miss);
    char text[1024];
    snprintf(text, sizeof text, "%s%s", why, arg ? arg : "");
    json_object_set_new(r, "error", json_string(text));
    s_reply(c, r, NULL, 0);
    return 0;
}

static void
s_reply_ok(s_conn_t *c, json_t *r, const int *fds, int nfds)
{
    if (!r)
        r = json_object();
    json_object_set_new(r, "ok", json_true());
    s_reply(c, r, fds, nfds);
}

/* Give taken kernel `l` to connection `c` (it owns it from here). */
static void
s_hand_out(s_conn_t *c, kb_launcher_t *l)
{
    c->l = l;
    sb_sandbox_t *box = kb_launcher_warm_box(l);
    const char *w = sb_sandbox_warnings(box);
    json_t *r =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "run_dir",
                  sb_sandbox_run_dir(box), "sock_dir", sb_sandbox_sock_dir(box),
                  "uid", (json_int_t)sb_sandbox_host_uid(box), "gid",
                  (json_int_t)sb_sandbox_host_gid(box), "pid",
                  (json_int_t)sb_sandbox_pid(box), "warnings", w ? w : "");
    /* The launcher's pidfd: the kernel's own for a forked kernel (its box
     * runs a holder), else the box's init. */
    int fds[3] = {l->ops->pidfd(l->self), sb_sandbox_workspace_fd(box),
                  sb_sandbox_cmd_socket(box)};
    s_reply_ok(c, r, fds, fds[2] >= 0 ? 3 : 2);
}

static int
s_handle_take(s_server_t *sv, s_conn_t *c, json_t *req)
{
    if (c->l)
        return s_reply_err(c, "this connection already holds a kernel", NULL,
                           false);
    const char *kernel = json_string_value(json_object_get(req, "kernel"));
    json_t *policy = json_object_get(req, "policy");
    if (strcasecmp(kernel ? kernel : "python3", sv->kernel_name) != 0 ||
        !json_equal(policy, sv->policy_json)) {
        sv->mismatches++;
        return s_reply_err(c,
                           "the pool holds other kernels (another "
                           "kernelspec or sandbox policy)",
                           NULL, true);
    }
    if (!sv->pool)
        return s_reply_err(c, "the server is stopping", NULL, true);
    if (c->wait_until)
        return s_reply_err(c, "a take is already waiting on this connection",
                           NULL, false);
    err_t err;
    int wait_ms = 0;
    /* The pool checks again against its own policy: pass that one (NULL
     * would mean the default policy, a miss for any other). */
    kb_launcher_t *l = kb_pool_take_wait(sv->pool, sv->kernel_name, sv->policy,
                                         &wait_ms, &err);
    if (!l && wait_ms > 0) { /* answered by s_retry_takes */
        c->wait_until = clock_mono_ms() + wait_ms;
        return 0;
    }
    if (!l)
        return s_reply_err(c, err.text, NULL, true);
    s_hand_out(c, l);
    return 0;
}

/* Retry the takes waiting for a warm-up (after kb_pool_poll): a kernel
 * that became ready goes to a waiting take; a take whose wait is over is
 * a miss (its client starts a cold kernel). */
static void
s_retry_takes(s_server_t *sv)
{
    int64_t now = clock_mono_ms();
    for (size_t i = 0; i < sv->nconns; i++) {
        s_conn_t *c = &sv->conns[i];
        if (!c->wait_until)
            continue;
        bool last = now >= c->wait_until || !sv->pool;
        err_t err = {0};
        kb_launcher_t *l =
            sv->pool ? kb_pool_take_again(sv->pool, last, &err) : NULL;
        if (l) {
            c->wait_until = 0;
            s_hand_out(c, l);
        } else if (last) {
            c->wait_until = 0;
            s_reply_err(c, sv->pool ? err.text : "the server is stopping", NULL,
                        true);
        }
    }
}

/* Milliseconds until the first waiting take gives up, or -1. */
static int
s_next_wait_ms(const s_server_t *sv)
{
    int64_t least = -1, now = clock_mono_ms();
    for (size_t i = 0; i < sv->nconns; i++) {
        int64_t t = sv->conns[i].wait_until;
        if (!t)
            continue;
        int64_t left = t > now ? t - now : 0;
        if (least < 0 || left < least)
            least = left;
    }
    return (int)least;
}

static int
s_handle_spawn(s_conn_t *c, json_t *req, int *fds, int nfds)
{
    if (!c->l)
        return s_reply_err(c, "take a kernel first", NULL, false);
    char **argv = s_strv(json_object_get(req, "argv"));
    char **env = s_strv(json_object_get(req, "env"));
    if (!argv || !argv[0] || !env) {
        strv_free(argv);
        strv_free(env);
        return s_reply_err(c, "spawn needs argv and env", NULL, false);
    }
    err_t err;
    int out = nfds > 0 ? fds[0] : -1;
    int rc = c->l->ops->spawn(c->l->self, argv, env, out, &err);
    strv_free(argv);
    strv_free(env);
    if (rc)
        return s_reply_err(c, err.text, NULL, false);
    sb_sandbox_t *box = kb_launcher_warm_box(c->l);
    int pidfd = c->l->ops->pidfd(c->l->self);
    s_reply_ok(c, json_pack("{s:I}", "pid", (json_int_t)sb_sandbox_pid(box)),
               &pidfd, 1);
    return 0;
}

static json_t *
s_stats_json(const s_server_t *sv)
{
    kb_pool_stats_t st = {0};
    if (sv->pool)
        kb_pool_stats(sv->pool, &st);
    size_t taken = s_sessions(sv);
    json_t *j = json_pack(
        "{s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:i}", "ready",
        (int)st.ready, "starting", (int)st.starting, "hits",
        (json_int_t)st.hits, "misses", (json_int_t)(st.misses + sv->mismatches),
        "started", (json_int_t)st.started, "failed", (json_int_t)st.failed,
        "sessions", (json_int_t)taken, "last_error",
        st.last_error ? st.last_error : "", "kernel", sv->kernel_name,
        "factory_pid", sv->factory ? (int)kb_factory_pid(sv->factory) : 0);
    /* Warm-up times of this server's one pool: start to ready, in ms; -1
     * before the first. */
    /* Misses: found nothing ready at once; of them, "waited" got a
     * warm-up that finished meanwhile, "cold_misses" started cold. The
     * pool's target ("size") grows with misses up to "max_size". */
    json_object_set_new(j, "waited", json_integer((json_int_t)st.waited));
    json_object_set_new(j, "cold_misses",
                        json_integer((json_int_t)(st.cold + sv->mismatches)));
    json_object_set_new(j, "size", json_integer((json_int_t)st.target));
    json_object_set_new(j, "max_size", json_integer((json_int_t)st.max_size));
    json_object_set_new(j, "abandoned", json_integer((json_int_t)st.abandoned));
    json_object_set_new(j, "paused", json_boolean(st.paused));
    json_object_set_new(j, "warmups", json_integer((json_int_t)st.warmups));
    json_object_set_new(j, "warmup_last_ms", json_integer(st.warmup_last_ms));
    json_object_set_new(j, "warmup_p50_ms", json_integer(st.warmup_p50_ms));
    json_object_set_new(j, "warmup_max_ms", json_integer(st.warmup_max_ms));
    json_object_set_new(j, "warmup_window",
                        json_integer(KB_POOL_WARMUP_WINDOW));
    return j;
}

/* One request; returns false when the connection should be dropped. */
static bool
s_handle(s_server_t *sv, s_conn_t *c)
{
    json_t *req;
    int fds[MAX_FDS], nfds;
    if (s_recv(c->fd, 0, &req, fds, &nfds) != 1)
        return false;
    const char *op = json_string_value(json_object_get(req, "op"));
    op = op ? op : "";
    char why[256] = "";
    if (strcmp(op, "take") == 0) {
        s_handle_take(sv, c, req);
    } else if (strcmp(op, "spawn") == 0) {
        s_handle_spawn(c, req, fds, nfds);
    } else if (strcmp(op, "reap") == 0 && c->l) {
        int done = c->l->ops->reap(c->l->self, 0, why, sizeof why);
        s_reply_ok(c, json_pack("{s:b, s:s}", "done", done, "why", why), NULL,
                   0);
    } else if (strcmp(op, "kill") == 0 && c->l) {
        c->l->ops->kill(c->l->self);
        s_reply_ok(c, NULL, NULL, 0);
    } else if (strcmp(op, "stats") == 0) {
        s_reply_ok(c, s_stats_json(sv), NULL, 0);
    } else if (strcmp(op, "stop") == 0) {
        /* Handed-out sessions belong to their clients: they keep running,
         * and the reply says how many. */
        sv->stop = true;
        s_reply_ok(
            c, json_pack("{s:I}", "sessions_left", (json_int_t)s_sessions(sv)),
            NULL, 0);
    } else {
        s_reply_err(c, "unknown or out-of-order request: ", op, false);
    }
    s_close_fds(fds, nfds);
    json_decref(req);
    return !c->failed;
}

static void
s_drop(s_server_t *sv, size_t i)
{
    kb_launcher_destroy(&sv->conns[i].l); /* kills and removes the box */
    close(sv->conns[i].fd);
    sv->conns[i] = sv->conns[--sv->nconns];
}

static bool
s_peer_ok(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
           (cr.uid == geteuid() || cr.uid == 0);
}

/* Accept every waiting connection (up to ACCEPT_BURST this round): a burst
 * of clients must not find the backlog full. Refused: other users, and
 * anyone past MAX_CONNS. */
static void
s_accept(s_server_t *sv, int lfd)
{
    for (int i = 0; i < ACCEPT_BURST; i++) {
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0)
            return; /* EAGAIN: none left (or a transient error) */
        int buf = CONN_SNDBUF;
        if (sv->nconns >= MAX_CONNS || !s_peer_ok(cfd) ||
            setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) < 0) {
            close(cfd);
            continue;
        }
        sv->conns[sv->nconns++] = (s_conn_t){.fd = cfd};
    }
}

/* Create the socket's directory (0700, ours) and bind; a stale socket
 * nobody answers on is replaced, a live one is an error. */
static int
s_listen(const char *path, err_t *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return err_set(err, ERR_USAGE, "serve: socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        for (char *p = dir + 1; *p; p++)
            if (*p == '/') {
                *p = '\0';
                mkdir(dir, 0755);
                *p = '/';
            }
        mkdir(dir, 0700);
        struct stat st;
        if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid() || (st.st_mode & 0077)) {
            err_set(err, ERR_USAGE,
                    "serve: %s must be a directory owned by you with mode "
                    "0700",
                    dir);
            free(dir);
            return -1;
        }
    }
    free(dir);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_set(err, ERR_IO, "serve: socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        close(fd);
        return err_set(err, ERR_USAGE,
                       "serve: another server already listens on %s", path);
    }
    close(fd);
    unlink(path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, SOMAXCONN) < 0) {
        err_set(err, ERR_IO, "serve: listening on %s: %s", path,
                strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int
kb_serve_run(const kb_serve_opts_t *o, err_t *err)
{
    int rc = -1, lfd = -1, sfd = -1;
    char *path = s_path(o->socket_path, err);
    if (!path)
        return -1;
    s_server_t *sv = xcalloc(1, sizeof *sv);
    sv->kernel_name = xstrdup(o->kernel_name ? o->kernel_name : "python3");
    sv->policy = o->policy;
    sb_policy_t defaults;
    sb_policy_init_default(&defaults);
    sv->policy_json = sb_policy_to_json(o->policy ? o->policy : &defaults);
    sv->policy = o->policy;
    sb_policy_release(&defaults);
    if (o->factory) {
        kb_factory_opts_t fo = {.preload = o->preload};
        sv->factory = kb_factory_new(&fo, err);
        if (!sv->factory)
            goto out;
    }
    kb_pool_opts_t po = {.kernel_name = sv->kernel_name,
                         .factory = sv->factory,
                         .policy = o->policy,
                         .size = o->pool_size ? o->pool_size : 4,
                         .max_size = o->pool_max,
                         .preload = o->preload,
                         .warmup_timeout_ms = o->warmup_timeout_ms};
    sv->pool = kb_pool_new(&po, err);
    if (!sv->pool)
        goto out;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sfd = signalfd(-1, &set, SFD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);
    if ((lfd = s_listen(path, err)) < 0)
        goto out;
    kb_pool_poll(sv->pool, 0); /* start warming now */
    if (o->on_listening)
        o->on_listening(path, o->arg);
    while (!sv->stop || s_sessions(sv) > 0) {
        if (sv->stop && sv->pool) {
            /* Stop handing out and refilling at once: the socket goes (a
             * new server may start), the warm kernels nobody took die. */
            close(lfd);
            lfd = -1;
            unlink(path);
            kb_pool_destroy(&sv->pool);
        }
        struct pollfd pf[2 + MAX_CONNS + 64];
        size_t n = 0;
        pf[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (size_t i = 0; i < sv->nconns; i++)
            pf[n++] = (struct pollfd){.fd = sv->conns[i].fd, .events = POLLIN};
        int pool_fds[64];
        size_t np = sv->pool ? kb_pool_fds(sv->pool, pool_fds, 64) : 0;
        for (size_t i = 0; i < np; i++)
            pf[n++] = (struct pollfd){.fd = pool_fds[i], .events = POLLIN};
        int timeout = sv->pool ? kb_pool_next_ms(sv->pool) : -1;
        int wait = s_next_wait_ms(sv);
        if (wait >= 0 && (timeout < 0 || wait < timeout))
            timeout = wait;
        if (timeout < 0 || timeout > 1000)
            timeout = 1000;
        int pr = poll(pf, n, timeout);
        if (pr < 0 && errno != EINTR) {
            err_set(err, ERR_IO, "serve: poll: %s", strerror(errno));
            goto out;
        }
        if (pr > 0 && pf[0].revents)
            break; /* SIGINT, SIGTERM or SIGHUP */
        /* Connections first (a take must not wait for a refill). */
        for (size_t i = sv->nconns; i-- > 0;)
            if (pf[2 + i].revents && !s_handle(sv, &sv->conns[i]))
                s_drop(sv, i);
        if (pr > 0 && lfd >= 0 && pf[1].revents)
            s_accept(sv, lfd);
        if (sv->pool)
            kb_pool_poll(sv->pool, 0);
        s_retry_takes(sv);
    }
    rc = 0;
out:
    while (sv->nconns)
        s_drop(sv, sv->nconns - 1);
    kb_pool_destroy(&sv->pool);
    kb_factory_destroy(&sv->factory);
    if (lfd >= 0) {
        close(lfd);
        unlink(path);
    }
    if (sfd >= 0)
        close(sfd);
    json_decref(sv->policy_json);
    free(sv->kernel_name);
    free(sv);
    free(path);
    return rc;
}

/* ==================== client ==================== */

typedef struct s_remote {
    int sock;           /* owned connection to the server */
    char *run_dir;      /* owned: the box's run dir on the host */
    char *sock_dir;     /* owned: its socket dir (see sb_sandbox.h) */
    uid_t uid;          /* host uid of the box user */
    gid_t gid;          /* host gid of the box user */
    int pidfd;          /* owned pidfd of the box's init */
    int ws_fd;          /* owned dir fd of the box's /mnt/data */
    int cmd_fd;         /* owned: the box's command socket, or -1 */
    char ws_path[40];   /* "/proc/self/fd/N" */
    char *warnings;     /* owned, "" when none */
    sb_policy_t policy; /* owned copy of the session's policy */
    bool gone;          /* reap reported the box ended */
} s_remote_t;

/* Is the directory holding `path` ours and closed to everyone else (the
 * server makes it 0700)? Else someone else could have put the socket
 * there. 0, or -1 with err. */
static int
s_check_dir(const char *path, err_t *err)
{
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    int rc = 0;
    if (lstat(dir, &st) != 0) {
        rc = err_set(err, ERR_USAGE, "serve: cannot inspect %s: %s", dir,
                     strerror(errno));
    } else if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
               (st.st_mode & 0077)) {
        rc = err_set(err, ERR_USAGE,
                     "serve: not trusting the socket %s: its directory %s "
                     "is %s owned by uid %u with mode %04o, but must be a "
                     "directory of yours (uid %u) with mode 0700; remove it "
                     "or set JUPYTER_AGENT_SERVE_SOCKET to a path in such a "
                     "directory",
                     path, dir, S_ISDIR(st.st_mode) ? "a directory" : "not",
                     (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                     (unsigned)geteuid());
    }
    free(dir);
    return rc;
}

/* Connect to the server at `path`, trusting it only if its directory is
 * ours alone and the process listening runs as us (SO_PEERCRED): nothing,
 * not even the request, goes to anyone else. Returns the socket, or -1
 * with err; *absent says that nothing listens there. */
static int
s_connect(const char *path, bool *absent, err_t *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    *absent = false;
    if (!path)
        return -1; /* s_path said why */
    if (strlen(path) >= sizeof sa.sun_path)
        return err_set(err, ERR_USAGE, "serve: socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) != 0) {
        *absent = true;
        return err_set(err, ERR_USAGE,
                       "no 'jupyter-agent serve' answers at %s (%s)", path,
                       strerror(errno));
    }
    if (s_check_dir(path, err))
        return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_set(err, ERR_IO, "serve: socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        *absent = true;
        err_set(err, ERR_USAGE, "no 'jupyter-agent serve' answers at %s (%s)",
                path, strerror(errno));
        close(fd);
        return -1;
    }
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 ||
        cr.uid != geteuid()) {
        err_set(err, ERR_USAGE,
                "serve: not trusting the server at %s: it runs as uid %d, "
                "not as you (uid %u); stop it, or set "
                "JUPYTER_AGENT_SERVE_SOCKET to your own server's socket",
                path, len == sizeof cr ? (int)cr.uid : -1, (unsigned)geteuid());
        close(fd);
        return -1;
    }
    return fd;
}

/* Send `req` (stolen) with fds and wait for the reply (new) or NULL. */
static json_t *
s_call(int sock, json_t *req, const int *fds, int nfds, int timeout_ms,
       int *got_fds, int *ngot, err_t *err)
{
    int tmp[MAX_FDS], ntmp = 0;
    json_t *reply = NULL;
    if (!got_fds) {
        got_fds = tmp;
        ngot = &ntmp;
    }
    if (s_send(sock, req, fds, nfds) < 0) {
        err_set(err, ERR_KERNEL, "serve: the server went away (%s)",
                strerror(errno));
    } else if (s_recv(sock, timeout_ms, &reply, got_fds, ngot) != 1) {
        err_set(err, ERR_KERNEL, "serve: no answer from the server");
    } else if (!json_is_true(json_object_get(reply, "ok"))) {
        const char *why = json_string_value(json_object_get(reply, "error"));
        err_set(err, ERR_KERNEL, "serve: %s", why ? why : "request refused");
        s_close_fds(got_fds, *ngot);
        *ngot = 0;
        if (!json_is_true(json_object_get(reply, "miss"))) {
            json_decref(reply);
            reply = NULL;
        }
    }
    if (got_fds == tmp)
        s_close_fds(tmp, ntmp);
    json_decref(req);
    return reply;
}

static const char *
r_sock_dir(void *self)
{
    return ((s_remote_t *)self)->sock_dir;
}

static const char *
r_run_dir(void *self)
{
    return ((s_remote_t *)self)->run_dir;
}

static int
r_spawn(void *self, char *const argv[], char *const envp[], int out_fd,
        err_t *err)
{
    s_remote_t *r = self;
    json_t *req = json_pack("{s:s, s:o, s:o}", "op", "spawn", "argv",
                            s_json_strv(argv), "env", s_json_strv(envp));
    int fds[MAX_FDS], n = 0;
    json_t *reply = s_call(r->sock, req, &out_fd, out_fd >= 0 ? 1 : 0,
                           SPAWN_TIMEOUT_MS, fds, &n, err);
    bool ok = reply && json_is_true(json_object_get(reply, "ok")) && n == 1;
    json_decref(reply);
    if (!ok) {
        s_close_fds(fds, n);
        return -1;
    }
    if (r->pidfd >= 0)
        close(r->pidfd);
    r->pidfd = fds[0];
    r->gone = false;
    return 0;
}

static int
r_pidfd(void *self)
{
    s_remote_t *r = self;
    return r->gone ? -1 : r->pidfd;
}

static int
r_signal(void *self, int sig)
{
    s_remote_t *r = self;
    return (int)syscall(SYS_pidfd_send_signal, r->pidfd, sig, NULL, 0);
}

static int
r_kill(void *self)
{
    s_remote_t *r = self;
    json_t *reply = s_call(r->sock, json_pack("{s:s}", "op", "kill"), NULL, 0,
                           5000, NULL, NULL, NULL);
    json_decref(reply);
    /* Init dies with SIGKILL in any case; the server removes the rest. */
    syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
    return 0;
}

static int
r_reap(void *self, int timeout_ms, char *why, size_t why_len)
{
    s_remote_t *r = self;
    if (r->gone) {
        snprintf(why, why_len, "not running");
        return 1;
    }
    struct pollfd pf = {.fd = r->pidfd, .events = POLLIN};
    int pr;
    while ((pr = poll(&pf, 1, timeout_ms < 0 ? -1 : timeout_ms)) < 0 &&
           errno == EINTR)
        ;
    if (pr == 0)
        return 0;
    json_t *reply = s_call(r->sock, json_pack("{s:s}", "op", "reap"), NULL, 0,
                           5000, NULL, NULL, NULL);
    if (!reply) {
        snprintf(why, why_len, "ended (the serve process is gone)");
        r->gone = true;
        return 1;
    }
    bool done = json_is_true(json_object_get(reply, "done"));
    const char *w = json_string_value(json_object_get(reply, "why"));
    if (done) {
        snprintf(why, why_len, "%s", w ? w : "ended");
        r->gone = true;
    }
    json_decref(reply);
    return done ? 1 : 0;
}

static char **
r_build_env(void *self, char *const extra[])
{
    s_remote_t *r = self;
    return sb_policy_build_env(&r->policy, environ, (const char *const *)extra);
}

static int
r_adopt_file(void *self, const char *path, err_t *err)
{
    s_remote_t *r = self;
    if (chown(path, r->uid, r->gid) || chmod(path, 0600))
        return err_set(err, ERR_SANDBOX,
                       "cannot hand %s to the sandbox user: %s", path,
                       strerror(errno));
    return 0;
}

/* --keep-workspace: copy the box's workspace out (once). */
static int
r_finish(void *self, err_t *err)
{
    s_remote_t *r = self;
    if (!r->policy.keep_workspace_dir || r->ws_fd < 0)
        return 0;
    sb_files_out_opts_t o;
    sb_policy_out_opts(&r->policy, &o);
    int rc = sb_files_copy_out(r->ws_fd, ".", r->policy.keep_workspace_dir, &o,
                               NULL, err);
    if (rc < 0)
        err_prefix(err, "keeping the workspace in '%s'",
                   r->policy.keep_workspace_dir);
    free(r->policy.keep_workspace_dir);
    r->policy.keep_workspace_dir = NULL; /* done: not again in destroy */
    return rc;
}

static void
r_destroy(void *self)
{
    s_remote_t *r = self;
    err_t err = {0};
    if (r_finish(r, &err) < 0)
        log_warn("%s", err.text);
    close(r->sock); /* the server kills and removes the box */
    if (r->pidfd >= 0)
        close(r->pidfd);
    if (r->ws_fd >= 0)
        close(r->ws_fd);
    if (r->cmd_fd >= 0)
        close(r->cmd_fd);
    free(r->run_dir);
    free(r->sock_dir);
    free(r->warnings);
    sb_policy_release(&r->policy);
    free(r);
}

/* The server owns the box and removes it when we hang up (r_destroy). */
static int
r_hand_off(void *self)
{
    s_remote_t *r = self;
    return r->policy.keep_workspace_dir ? -1 : 0;
}

static const kb_launcher_ops_t s_remote_ops = {
    .name = "sandbox",
    .run_dir = r_run_dir,
    .sock_dir = r_sock_dir,
    .spawn = r_spawn,
    .pidfd = r_pidfd,
    .signal = r_signal,
    .kill = r_kill,
    .reap = r_reap,
    .build_env = r_build_env,
    .adopt_file = r_adopt_file,
    .destroy = r_destroy,
    .hand_off = r_hand_off,
    .finish = r_finish,
};

kb_launcher_t *
kb_serve_take(const char *socket_path, const char *kernel_name,
              const sb_policy_t *policy, bool *no_server, err_t *err)
{
    char *path = s_path(socket_path, err);
    bool absent;
    int sock = s_connect(path, &absent, err);
    free(path);
    *no_server = sock < 0;
    if (sock < 0) {
        if (absent && err) {
            size_t n = strlen(err->text);
            snprintf(err->text + n, sizeof err->text - n,
                     "; start one or use --warm cold");
        }
        return NULL;
    }
    sb_policy_t defaults;
    sb_policy_init_default(&defaults);
    const sb_policy_t *p = policy ? policy : &defaults;
    json_t *req = json_pack("{s:s, s:s, s:o}", "op", "take", "kernel",
                            kernel_name ? kernel_name : "python3", "policy",
                            sb_policy_to_json(p));
    int fds[MAX_FDS], n = 0;
    json_t *reply = s_call(sock, req, NULL, 0, TAKE_TIMEOUT_MS, fds, &n, err);
    kb_launcher_t *l = NULL;
    const char *run_dir = json_string_value(json_object_get(reply, "run_dir"));
    if (!reply || !json_is_true(json_object_get(reply, "ok")) || n < 2 ||
        !run_dir) {
        if (reply && json_is_true(json_object_get(reply, "ok")))
            err_set(err, ERR_KERNEL, "serve: malformed take reply");
        s_close_fds(fds, n);
        close(sock);
        goto out;
    }
    s_remote_t *r = xcalloc(1, sizeof *r);
    r->sock = sock;
    r->run_dir = xstrdup(run_dir);
    const char *sd = json_string_value(json_object_get(reply, "sock_dir"));
    r->sock_dir = xstrdup(sd ? sd : run_dir);
    r->uid = (uid_t)json_integer_value(json_object_get(reply, "uid"));
    r->gid = (gid_t)json_integer_value(json_object_get(reply, "gid"));
    r->pidfd = fds[0];
    r->ws_fd = fds[1];
    r->cmd_fd = n > 2 ? fds[2] : -1;
    s_close_fds(fds + 3, n > 3 ? n - 3 : 0);
    snprintf(r->ws_path, sizeof r->ws_path, "/proc/self/fd/%d", r->ws_fd);
    const char *w = json_string_value(json_object_get(reply, "warnings"));
    r->warnings = xstrdup(w ? w : "");
    sb_policy_copy(&r->policy, p);
    l = xcalloc(1, sizeof *l);
    l->ops = &s_remote_ops;
    l->self = r;
out:
    json_decref(reply);
    sb_policy_release(&defaults);
    return l;
}

static s_remote_t *
s_remote(kb_launcher_t *l)
{
    return l && l->ops == &s_remote_ops ? l->self : NULL;
}

const char *
kb_serve_launcher_workspace(kb_launcher_t *l)
{
    s_remote_t *r = s_remote(l);
    return r ? r->ws_path : NULL;
}

sb_proc_engine_t *
kb_serve_launcher_proc_engine(kb_launcher_t *l, err_t *err)
{
    s_remote_t *r = s_remote(l);
    int fd = r && r->cmd_fd >= 0 ? fcntl(r->cmd_fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (fd < 0) {
        err_set(err, ERR_SANDBOX,
                "command: the serve pool gave this kernel without its box's "
                "command socket (an older serve?); restart serve");
        return NULL;
    }
    return sb_proc_engine_on_fd(fd);
}

const char *
kb_serve_launcher_warnings(kb_launcher_t *l)
{
    s_remote_t *r = s_remote(l);
    return r ? r->warnings : NULL;
}

int
kb_serve_launcher_add_file(kb_launcher_t *l, const char *host_path,
                           const char *name, err_t *err)
{
    s_remote_t *r = s_remote(l);
    if (!r)
        return err_set(err, ERR_USAGE, "not a served kernel");
    uid_t owner = geteuid() == 0 ? r->uid : (uid_t)-1;
    return sb_files_copy_in(r->ws_fd, host_path, name,
                            r->policy.workspace_bytes, owner, r->gid, err);
}

json_t *
kb_serve_request(const char *socket_path, const char *op, err_t *err)
{
    char *path = s_path(socket_path, err);
    bool absent;
    int sock = s_connect(path, &absent, err);
    free(path);
    if (sock < 0)
        return NULL;
    json_t *reply = s_call(sock, json_pack("{s:s}", "op", op), NULL, 0, 10000,
                           NULL, NULL, err);
    close(sock);
    return reply;
}
