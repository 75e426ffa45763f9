/* The client side of `serve`: connect to its socket, take a warm kernel
 * (a launcher whose box the server made), ask for its status or stop. */
#include "kernel-bridge/pool/kb_serve.h"
#include "kernel-bridge/pool/kb_serve_impl.h"

#include "common/log.h"
#include "common/xalloc.h"
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
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

#define TAKE_TIMEOUT_MS 10000
#define SPAWN_TIMEOUT_MS 120000 /* a restart is a cold start */

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
        rc = err_errno(err, ERR_USAGE, "serve: cannot inspect %s", dir);
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
        return -1; /* kb_serve_path said why */
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
        return err_errno(err, ERR_IO, "serve: socket");
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
    int tmp[KB_SERVE_MAX_FDS], ntmp = 0;
    json_t *reply = NULL;
    if (!got_fds) {
        got_fds = tmp;
        ngot = &ntmp;
    }
    if (kb_serve_send(sock, req, fds, nfds) < 0) {
        err_set(err, ERR_KERNEL, "serve: the server went away (%s)",
                strerror(errno));
    } else if (kb_serve_recv(sock, timeout_ms, &reply, got_fds, ngot) != 1) {
        err_set(err, ERR_KERNEL, "serve: no answer from the server");
    } else if (!json_is_true(json_object_get(reply, "ok"))) {
        const char *why = json_string_value(json_object_get(reply, "error"));
        err_set(err, ERR_KERNEL, "serve: %s", why ? why : "request refused");
        kb_serve_close_fds(got_fds, *ngot);
        *ngot = 0;
        if (!json_is_true(json_object_get(reply, "miss"))) {
            json_decref(reply);
            reply = NULL;
        }
    }
    if (got_fds == tmp)
        kb_serve_close_fds(tmp, ntmp);
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
    json_t *req =
        json_pack("{s:s, s:o, s:o}", "op", "spawn", "argv",
                  kb_serve_json_strv(argv), "env", kb_serve_json_strv(envp));
    int fds[KB_SERVE_MAX_FDS], n = 0;
    json_t *reply = s_call(r->sock, req, &out_fd, out_fd >= 0 ? 1 : 0,
                           SPAWN_TIMEOUT_MS, fds, &n, err);
    bool ok = reply && json_is_true(json_object_get(reply, "ok")) && n == 1;
    json_decref(reply);
    if (!ok) {
        kb_serve_close_fds(fds, n);
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
        return err_errno(err, ERR_SANDBOX, "cannot hand %s to the sandbox user",
                         path);
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
    char *path = kb_serve_path(socket_path, err);
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
    int fds[KB_SERVE_MAX_FDS], n = 0;
    json_t *reply = s_call(sock, req, NULL, 0, TAKE_TIMEOUT_MS, fds, &n, err);
    kb_launcher_t *l = NULL;
    const char *run_dir = json_string_value(json_object_get(reply, "run_dir"));
    if (!reply || !json_is_true(json_object_get(reply, "ok")) || n < 2 ||
        !run_dir) {
        if (reply && json_is_true(json_object_get(reply, "ok")))
            err_set(err, ERR_KERNEL, "serve: malformed take reply");
        kb_serve_close_fds(fds, n);
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
    kb_serve_close_fds(fds + 3, n > 3 ? n - 3 : 0);
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
kb_serve_call(const char *socket_path, json_t *req, err_t *err)
{
    char *path = kb_serve_path(socket_path, err);
    bool absent;
    int sock = path ? s_connect(path, &absent, err) : -1;
    free(path);
    if (sock < 0) {
        json_decref(req);
        return NULL;
    }
    json_t *reply = s_call(sock, req, NULL, 0, 10000, NULL, NULL, err);
    close(sock);
    return reply;
}

json_t *
kb_serve_request(const char *socket_path, const char *op, err_t *err)
{
    return kb_serve_call(socket_path, json_pack("{s:s}", "op", op), err);
}
