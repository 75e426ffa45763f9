/* The serve process: a pool of warm kernels behind a unix socket
 * (kb_serve_client.c is the launcher that takes one; kb_serve_msg.c the
 * messages between them). */
#include "kernel-bridge/pool/kb_serve.h"
#include "kernel-bridge/pool/kb_serve_impl.h"

#include "common/clock.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "kernel-bridge/pool/kb_pool.h"
#include "kernel-bridge/pool/kb_warm.h"
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

#define MAX_CONNS 1024
/* Replies a client has not read yet: the socket's send buffer holds them,
 * capped here; a client that lets it fill is dropped (sends never block). */
#define CONN_SNDBUF (64 << 10)
/* Connections accepted in one poll round (the rest wait for the next). */
#define ACCEPT_BURST 256

/* ==================== server ==================== */

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
    if (kb_serve_send(c->fd, r, fds, nfds) < 0)
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

/* {"op":"network","pid":N,"allow_net":RULES}: the operator replaces the
 * --allow-net rules of the handed-out box whose pid 1 is N (as "spawn"
 * answered; --status lists them). Only the server's own uid or root
 * reaches this socket, and no box can: it is not in their mounts. */
static void
s_handle_network(s_server_t *sv, s_conn_t *c, json_t *req)
{
    json_int_t pid = json_integer_value(json_object_get(req, "pid"));
    const char *rules = json_string_value(json_object_get(req, "allow_net"));
    if (pid <= 0 || !rules) {
        s_reply_err(c, "network needs pid and allow_net", NULL, false);
        return;
    }
    for (size_t i = 0; i < sv->nconns; i++) {
        sb_sandbox_t *box =
            sv->conns[i].l ? kb_launcher_warm_box(sv->conns[i].l) : NULL;
        if (!box || sb_sandbox_pid(box) != (pid_t)pid)
            continue;
        err_t err = {0};
        if (sb_sandbox_set_net_rules(box, rules, &err) < 0)
            s_reply_err(c, err.text, NULL, false);
        else
            s_reply_ok(c, json_pack("{s:s}", "allow_net", rules), NULL, 0);
        return;
    }
    s_reply_err(c, "no session of this server runs in a box with that pid",
                NULL, false);
}

/* The handed-out boxes with an egress proxy: [{"pid", "allow_net"}]. */
static json_t *
s_net_json(const s_server_t *sv)
{
    json_t *a = json_array();
    for (size_t i = 0; i < sv->nconns; i++) {
        sb_sandbox_t *box =
            sv->conns[i].l ? kb_launcher_warm_box(sv->conns[i].l) : NULL;
        char *rules = box ? sb_sandbox_net_rules(box) : NULL;
        if (rules)
            json_array_append_new(a, json_pack("{s:I, s:s}", "pid",
                                               (json_int_t)sb_sandbox_pid(box),
                                               "allow_net", rules));
        free(rules);
    }
    return a;
}

/* One request; returns false when the connection should be dropped. */
static bool
s_handle(s_server_t *sv, s_conn_t *c)
{
    json_t *req;
    int fds[KB_SERVE_MAX_FDS], nfds;
    if (kb_serve_recv(c->fd, 0, &req, fds, &nfds) != 1)
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
        json_t *st = s_stats_json(sv);
        json_object_set_new(st, "network", s_net_json(sv));
        s_reply_ok(c, st, NULL, 0);
    } else if (strcmp(op, "network") == 0) {
        s_handle_network(sv, c, req);
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
    kb_serve_close_fds(fds, nfds);
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
        return err_errno(err, ERR_IO, "serve: socket");
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
        err_errno(err, ERR_IO, "serve: listening on %s", path);
        close(fd);
        return -1;
    }
    return fd;
}

int
kb_serve_run(const kb_serve_opts_t *o, err_t *err)
{
    int rc = -1, lfd = -1, sfd = -1;
    char *path = kb_serve_path(o->socket_path, err);
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
            err_errno(err, ERR_IO, "serve: poll");
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
