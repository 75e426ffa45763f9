/* A pre-started ipykernel in a sandbox, and its hand-over launcher. */
#include "kernel-bridge/pool/kb_warm.h"

#include "common/strv.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_conn.h"
#include "kernel-bridge/kb_kernelspec.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "kernel-bridge/pool/kb_pysrc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define HANDOVER_TIMEOUT_MS 10000
#define OUT_CAP (256 << 10)
/* cpu.weight of a box while its kernel warms up (100 once handed over):
 * warm-ups use what the boxes in use leave. */
#define WARM_CPU_WEIGHT 10

struct kb_warm {
    kb_warm_state_t state; /* see kb_warm.h */
    sb_sandbox_t *box;     /* owned */
    char *kernel_name;     /* owned kernelspec name */
    char **argv;           /* owned: the spec's argv for our connection file */
    char *conn_path;       /* owned: run_dir/kernel.json (the host's) */
    char *box_conn;        /* owned: sock_dir/kernel.json (the kernel's
                              copy, see sb_sandbox_add_box_file) */
    int ctl;               /* owned host end of the control socket, or -1 */
    int out_fd;            /* owned memfd: the kernel's own stdout/stderr */
    bool handed_over;      /* launcher: the first spawn() happened */
    bool restarted;        /* a cold kernel replaced the warm one */
    kb_factory_t *factory; /* borrowed; set while the kernel is a forked one */
    pid_t kpid;            /* forked kernel's host pid, or -1 */
    int kpidfd;            /* owned pidfd of the forked kernel, or -1 */
    unsigned long ticket;  /* the factory's answer (kpid) not yet in, or 0 */
    bool said_ready;       /* the kernel said "ready" before that answer */
    int64_t started_ms;    /* CLOCK_MONOTONIC ms when the warm-up began */
    int64_t warmup_ms;     /* start to ready, or -1 while not ready */
    char error[512];       /* why it failed */
};

bool
kb_warm_argv_is_ipykernel(char *const argv[])
{
    if (!argv || !argv[0] || argv[0][0] != '/')
        return false;
    const char *want[] = {"-m", "ipykernel_launcher", "-f",
                          "{connection_file}"};
    for (int i = 0; i < 4; i++)
        if (!argv[i + 1] || strcmp(argv[i + 1], want[i]) != 0)
            return false;
    const char *base = strrchr(argv[0], '/') + 1;
    return argv[5] == NULL && strncmp(base, "python", 6) == 0;
}

static int
s_memfd(void)
{
    int fd = memfd_create("warm-kernel-out", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, OUT_CAP) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The environment kb_kernel would give this kernel (same extras). */
static char **
s_env(const kb_warm_t *w, const kb_kernelspec_t *spec)
{
    size_t n = 0;
    char **extra = xcalloc(3, sizeof *extra);
    extra[n++] = xstrdup("PYDEVD_DISABLE_FILE_VALIDATION=1");
    extra[n++] = xstrdup("JPY_SESSION_NAME=jupyter-agent");
    const char *key;
    json_t *value;
    json_object_foreach(spec->env, key, value)
    {
        if (!json_is_string(value))
            continue;
        extra = xrealloc(extra, (n + 2) * sizeof *extra);
        extra[n++] = xasprintf("%s=%s", key, json_string_value(value));
    }
    extra[n] = NULL;
    char **env = sb_policy_build_env(sb_sandbox_policy(w->box), environ,
                                     (const char *const *)extra);
    strv_free(extra);
    return env;
}

static void
s_fail(kb_warm_t *w, const char *why)
{
    if (w->state == KB_WARM_FAILED)
        return;
    w->state = KB_WARM_FAILED;
    snprintf(w->error, sizeof w->error, "%.*s", (int)sizeof w->error - 1, why);
}

static kb_warm_t *
s_start(kb_factory_t *factory, const kb_warm_opts_t *o, err_t *err)
{
    kb_kernelspec_t spec = {0};
    kb_conn_t conn;
    char **env = NULL;
    int sv[2] = {-1, -1};
    kb_warm_t *w = xcalloc(1, sizeof *w);
    w->started_ms = clock_mono_ms();
    w->warmup_ms = -1;
    w->ctl = w->out_fd = w->kpidfd = -1;
    w->kpid = -1;
    w->state = KB_WARM_STARTING;
    kb_conn_init(&conn);
    const char *name = o && o->kernel_name ? o->kernel_name : "python3";
    if (kb_kernelspec_find(name, &spec, err) ||
        kb_kernelspec_resolve_program(&spec, err))
        goto fail;
    if (!kb_warm_argv_is_ipykernel(spec.argv)) {
        err_set(err, ERR_USAGE,
                "kernel '%s' is not an ipykernel (%s ...); only ipykernel "
                "kernels can be pre-started",
                name, spec.argv[0]);
        goto fail;
    }
    w->kernel_name = xstrdup(spec.name);
    sb_policy_t defaults;
    sb_policy_init_default(&defaults);
    w->box = sb_sandbox_new(o && o->policy ? o->policy : &defaults, err);
    sb_policy_release(&defaults);
    if (!w->box || kb_sandbox_check_program(w->box, spec.argv[0], err))
        goto fail;
    /* A warm-up yields the CPU to boxes in use; hand-over restores it. */
    sb_sandbox_set_cpu_weight(w->box, WARM_CPU_WEIGHT);
    const char *run_dir = sb_sandbox_run_dir(w->box);
    char *prefix = xasprintf("%s/kernel", sb_sandbox_sock_dir(w->box));
    w->conn_path = xasprintf("%s/kernel.json", run_dir);
    int rc = kb_conn_init_ipc(&conn, prefix, err);
    free(prefix);
    if (rc)
        goto fail;
    free(conn.kernel_name);
    conn.kernel_name = xstrdup(w->kernel_name);
    if (kb_conn_save(&conn, w->conn_path, err))
        goto fail;
    if (kb_sandbox_adopt_file(w->box, w->conn_path, err))
        goto fail;
    w->box_conn = xasprintf("%s/kernel.json", sb_sandbox_sock_dir(w->box));
    w->argv = kb_kernelspec_expand_argv(&spec, w->box_conn);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        err_errno(err, ERR_SANDBOX, "warm kernel: socketpair");
        goto fail;
    }
    w->out_fd = s_memfd();
    env = s_env(w, &spec);
    char *preload = xstrdup(o && o->preload ? o->preload : "");
    char *entry = xstrdup(kb_warm_entry_py), *dash_c = xstrdup("-c");
    char *const argv[] = {spec.argv[0], dash_c,  entry,
                          w->box_conn,  preload, NULL};
    int spawned;
    if (factory) {
        /* The box runs a holder; the kernel is forked into it. The box
         * nests in the factory's, whose unprivileged program may enter
         * it only so. */
        sb_sandbox_nest_in(w->box, kb_factory_box(factory));
        char sleep_bin[] = "/usr/bin/sleep", inf[] = "infinity";
        char *holder[] = {sleep_bin, inf, NULL};
        char **henv =
            sb_policy_build_env(sb_sandbox_policy(w->box), NULL, NULL);
        spawned = sb_sandbox_spawn(w->box, holder, henv, -1, -1, err);
        strv_free(henv);
        /* The factory's answer (the kernel's pid) is collected by
         * kb_warm_poll: the caller's loop does not wait for it. */
        if (!spawned)
            spawned = kb_factory_fork_send(factory, w->box, sv[1], w->out_fd,
                                           w->box_conn, env, &w->ticket, err);
        if (!spawned)
            w->factory = factory;
    } else {
        sb_sandbox_set_stdin(w->box, sv[1]);
        spawned =
            sb_sandbox_spawn(w->box, argv, env, w->out_fd, w->out_fd, err);
    }
    free(preload);
    free(entry);
    free(dash_c);
    if (spawned)
        goto fail;
    sb_sandbox_set_stdin(w->box, -1);
    close(sv[1]);
    w->ctl = sv[0];
    strv_free(env);
    kb_conn_release(&conn);
    kb_kernelspec_release(&spec);
    return w;
fail:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    strv_free(env);
    kb_conn_release(&conn);
    kb_kernelspec_release(&spec);
    kb_warm_destroy(&w);
    return NULL;
}

kb_warm_t *
kb_warm_start(const kb_warm_opts_t *o, err_t *err)
{
    return s_start(NULL, o, err);
}

kb_warm_t *
kb_warm_fork(kb_factory_t *f, const kb_warm_opts_t *o, err_t *err)
{
    return s_start(f, o, err);
}

void
kb_warm_destroy(kb_warm_t **pw)
{
    if (!pw || !*pw)
        return;
    kb_warm_t *w = *pw;
    kb_factory_fork_forget(w->factory, w->ticket);
    if (w->ctl >= 0)
        close(w->ctl);
    if (w->kpidfd >= 0) {
        syscall(SYS_pidfd_send_signal, w->kpidfd, SIGKILL, NULL, 0);
        close(w->kpidfd);
    }
    char *audit = w->box ? sb_sandbox_seccomp_audit_report(w->box) : NULL;
    if (audit) /* serve --seccomp-audit: one line per box */
        log_warn("%s", audit);
    free(audit);
    sb_sandbox_destroy(&w->box);
    if (w->out_fd >= 0)
        close(w->out_fd);
    strv_free(w->argv);
    free(w->conn_path);
    free(w->box_conn);
    free(w->kernel_name);
    free(w);
    *pw = NULL;
}

/* The tail of what the kernel printed itself, for failure messages. */
static void
s_out_tail(const kb_warm_t *w, char *buf, size_t size)
{
    buf[0] = '\0';
    if (w->out_fd < 0)
        return;
    char *all = xmalloc(OUT_CAP + 1);
    ssize_t n = pread(w->out_fd, all, OUT_CAP, 0);
    all[n > 0 ? n : 0] = '\0';
    size_t len = strlen(all);
    size_t keep = len < size - 1 ? len : size - 1;
    memcpy(buf, all + len - keep, keep);
    buf[keep] = '\0';
    free(all);
}

/* Read one message from the control socket: a new object or NULL. */
static json_t *
s_read_msg(kb_warm_t *w)
{
    char buf[4096];
    ssize_t n;
    while ((n = recv(w->ctl, buf, sizeof buf - 1, MSG_DONTWAIT)) < 0 &&
           errno == EINTR)
        ;
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    json_t *m = json_loads(buf, JSON_REJECT_DUPLICATES, NULL);
    if (m && !json_is_object(m)) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* How a forked kernel ended, from the factory's report (waits up to
 * timeout_ms for it). */
static void
s_forked_exit(kb_warm_t *w, int timeout_ms, char *how, size_t len)
{
    int st = 0;
    int64_t end = clock_mono_ms() + timeout_ms;
    while (!kb_factory_exit_status(w->factory, w->kpid, &st) &&
           clock_mono_ms() < end)
        usleep(5000);
    if (!kb_factory_exit_status(w->factory, w->kpid, &st)) {
        snprintf(how, len, "ended");
        return;
    }
    sb_exit_t e = {0};
    if (WIFEXITED(st)) {
        e.kind = SB_EXITED;
        e.code = WEXITSTATUS(st);
    } else {
        e.kind = SB_SIGNALED;
        e.signal = WTERMSIG(st);
    }
    sb_exit_describe(&e, sb_sandbox_policy(w->box), how, len);
}

static void
s_note_death(kb_warm_t *w)
{
    sb_exit_t e;
    char how[128] = "ended", tail[400];
    if (w->factory && !w->ticket)
        s_forked_exit(w, 1000, how, sizeof how);
    else if (sb_sandbox_wait(w->box, 0, &e) == 0)
        sb_exit_describe(&e, sb_sandbox_policy(w->box), how, sizeof how);
    s_out_tail(w, tail, sizeof tail);
    char *msg =
        xasprintf("the warm kernel %s%s%s", how, tail[0] ? ": " : "", tail);
    s_fail(w, msg);
    free(msg);
}

static void
s_set_ready(kb_warm_t *w)
{
    w->state = KB_WARM_READY;
    w->warmup_ms = clock_mono_ms() - w->started_ms;
}

/* The factory's answer for a forked kernel, if it came: its pid and a
 * pidfd. True when the warm-up failed or became ready meanwhile. */
static bool
s_collect_pid(kb_warm_t *w)
{
    err_t err;
    pid_t pid = -1;
    int r = kb_factory_fork_result(w->factory, w->ticket, &pid, &err);
    if (r == 0)
        return false;
    w->ticket = 0;
    if (r < 0) {
        s_fail(w, err.text);
        return true;
    }
    w->kpid = pid;
    w->kpidfd = (int)syscall(SYS_pidfd_open, w->kpid, 0);
    if (w->kpidfd < 0) {
        char *msg =
            xasprintf("forked kernel gone at once: %s", strerror(errno));
        s_fail(w, msg);
        free(msg);
        return true;
    }
    if (w->said_ready)
        s_set_ready(w);
    return w->state != KB_WARM_STARTING;
}

int
kb_warm_factory_fd(const kb_warm_t *w)
{
    return w->ticket ? kb_factory_ctl_fd(w->factory) : -1;
}

kb_warm_state_t
kb_warm_poll(kb_warm_t *w, int timeout_ms)
{
    if (w->state != KB_WARM_STARTING) {
        if (w->state == KB_WARM_READY) { /* still alive? */
            struct pollfd pf = {.fd = kb_warm_pidfd(w), .events = POLLIN};
            if (poll(&pf, 1, 0) > 0)
                s_note_death(w);
        }
        return w->state;
    }
    struct pollfd pf[3] = {{.fd = w->ctl, .events = POLLIN},
                           {.fd = kb_warm_pidfd(w), .events = POLLIN},
                           {.fd = kb_warm_factory_fd(w), .events = POLLIN}};
    int64_t deadline = clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (w->ticket && s_collect_pid(w))
            return w->state;
        pf[1].fd = kb_warm_pidfd(w);
        pf[2].fd = kb_warm_factory_fd(w);
        int left = (int)(deadline - clock_mono_ms());
        int pr = poll(pf, 3, left > 0 ? left : 0);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return w->state;
        if (pf[0].revents) {
            json_t *m = s_read_msg(w);
            if (m && json_is_true(json_object_get(m, "ready"))) {
                /* Ready only once the factory's answer is in too. */
                w->said_ready = true;
                if (!w->ticket)
                    s_set_ready(w);
            } else if (m && json_is_string(json_object_get(m, "error"))) {
                s_fail(w, json_string_value(json_object_get(m, "error")));
            } else if (!m && !(pf[0].revents & POLLIN)) {
                s_note_death(w);
            }
            json_decref(m);
            if (w->state != KB_WARM_STARTING)
                return w->state;
        }
        if (pf[1].revents) {
            s_note_death(w);
            return w->state;
        }
    }
}

kb_warm_state_t
kb_warm_state(const kb_warm_t *w)
{
    return w->state;
}

const char *
kb_warm_error(const kb_warm_t *w)
{
    return w->error;
}

int
kb_warm_ctl_fd(const kb_warm_t *w)
{
    return w->ctl;
}

int
kb_warm_pidfd(const kb_warm_t *w)
{
    return w->factory ? w->kpidfd : sb_sandbox_pidfd(w->box);
}

pid_t
kb_warm_kernel_pid(const kb_warm_t *w)
{
    return w->factory ? w->kpid : -1;
}

int64_t
kb_warm_age_ms(const kb_warm_t *w)
{
    return clock_mono_ms() - w->started_ms;
}

int64_t
kb_warm_warmup_ms(const kb_warm_t *w)
{
    return w->warmup_ms;
}

/* ---- the launcher ---- */

static const char *
s_sock_dir(void *self)
{
    return sb_sandbox_sock_dir(((kb_warm_t *)self)->box);
}

static const char *
s_run_dir(void *self)
{
    kb_warm_t *w = self;
    return sb_sandbox_run_dir(w->box);
}

static bool
s_argv_equal(char *const a[], char *const b[])
{
    size_t i = 0;
    for (; a[i] && b[i]; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return !a[i] && !b[i];
}

/* Hand the running kernel over: it switches to the key in the connection
 * file the manager just wrote. */
static int
s_handover(kb_warm_t *w, char *const argv[], char *const envp[], err_t *err)
{
    int rc = -1;
    json_t *req = NULL, *reply = NULL, *env = json_object();
    char *text = NULL;
    if (!s_argv_equal(argv, w->argv)) {
        err_set(err, ERR_KERNEL,
                "warm kernel: asked to start a different command line than "
                "the one it was warmed for");
        goto out;
    }
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char *k = strndup(*e, (size_t)(eq - *e));
        json_object_set_new(env, k, json_string(eq + 1));
        free(k);
    }
    req = json_pack("{s:s, s:s, s:O}", "op", "rekey", "connection_file",
                    w->conn_path, "env", env);
    text = json_dumps(req, JSON_COMPACT);
    if (!text || send(w->ctl, text, strlen(text), MSG_NOSIGNAL) < 0) {
        err_errno(err, ERR_KERNEL, "warm kernel: cannot reach it");
        goto out;
    }
    struct pollfd pf = {.fd = w->ctl, .events = POLLIN};
    int pr;
    while ((pr = poll(&pf, 1, HANDOVER_TIMEOUT_MS)) < 0 && errno == EINTR)
        ;
    reply = pr > 0 ? s_read_msg(w) : NULL;
    if (!reply || !json_is_true(json_object_get(reply, "ok"))) {
        const char *why = json_string_value(json_object_get(reply, "error"));
        err_set(err, ERR_KERNEL, "warm kernel: hand-over failed: %s",
                why       ? why
                : pr == 0 ? "no answer"
                          : "it died");
        goto out;
    }
    rc = 0;
out:
    close(w->ctl); /* never used again, whatever happened */
    w->ctl = -1;
    free(text);
    json_decref(req);
    json_decref(reply);
    json_decref(env);
    return rc;
}

static int
s_spawn(void *self, char *const argv[], char *const envp[], int out_fd,
        err_t *err)
{
    kb_warm_t *w = self;
    if (!w->handed_over) {
        w->handed_over = true;
        return s_handover(w, argv, envp, err);
    }
    if (w->factory) {
        /* A restart of a forked kernel: the holder box goes, a cold kernel
         * starts in its place (sb_sandbox carries /mnt/data over). */
        syscall(SYS_pidfd_send_signal, w->kpidfd, SIGKILL, NULL, 0);
        close(w->kpidfd);
        w->kpidfd = -1;
        w->kpid = -1;
        w->factory = NULL;
        sb_sandbox_kill(w->box);
        sb_sandbox_wait(w->box, 5000, NULL);
        sb_sandbox_nest_in(w->box, NULL); /* a cold box of its own now */
    }
    /* A restart: a cold kernel in the same box. */
    w->restarted = true;
    return sb_sandbox_spawn(w->box, argv, envp, out_fd, out_fd, err);
}

static int
s_pidfd(void *self)
{
    return kb_warm_pidfd(self);
}

static int
s_signal(void *self, int sig)
{
    kb_warm_t *w = self;
    if (w->factory) /* straight to the kernel: the box's program is a holder */
        return (int)syscall(SYS_pidfd_send_signal, w->kpidfd, sig, NULL, 0);
    return sb_sandbox_signal(w->box, sig);
}

static int
s_kill(void *self)
{
    kb_warm_t *w = self;
    if (w->factory)
        syscall(SYS_pidfd_send_signal, w->kpidfd, SIGKILL, NULL, 0);
    return sb_sandbox_kill(w->box);
}

/* Append the last line the kernel printed itself (its own stderr, e.g.
 * "Fatal Python error: ..."), which kb_kernel cannot see for a warm
 * kernel, to `why`. */
static void
s_append_last_line(const kb_warm_t *w, char *why, size_t why_len)
{
    char tail[400];
    s_out_tail(w, tail, sizeof tail);
    size_t n = strlen(tail);
    while (n && (tail[n - 1] == '\n' || tail[n - 1] == '\r'))
        tail[--n] = '\0';
    const char *last = strrchr(tail, '\n');
    last = last ? last + 1 : tail;
    size_t used = strlen(why);
    if (*last && used + 4 < why_len)
        snprintf(why + used, why_len - used, ": %s", last);
}

static int
s_reap(void *self, int timeout_ms, char *why, size_t why_len)
{
    kb_warm_t *w = self;
    if (w->factory) {
        struct pollfd pf = {.fd = w->kpidfd, .events = POLLIN};
        int pr;
        while ((pr = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
            ;
        if (pr == 0)
            return 0;
        s_forked_exit(w, 1000, why, why_len);
        s_append_last_line(w, why, why_len);
        return 1;
    }
    if (!kb_sandbox_reap(w->box, timeout_ms, why, why_len))
        return 0;
    if (!w->restarted)
        s_append_last_line(w, why, why_len);
    return 1;
}

static char **
s_build_env(void *self, char *const extra[])
{
    kb_warm_t *w = self;
    return sb_policy_build_env(sb_sandbox_policy(w->box), environ,
                               (const char *const *)extra);
}

static int
s_adopt_file(void *self, const char *path, err_t *err)
{
    return kb_sandbox_adopt_file(((kb_warm_t *)self)->box, path, err);
}

static void
s_destroy(void *self)
{
    kb_warm_t *w = self;
    kb_warm_destroy(&w);
}

static const kb_launcher_ops_t s_ops = {
    .name = "sandbox",
    .run_dir = s_run_dir,
    .sock_dir = s_sock_dir,
    .spawn = s_spawn,
    .pidfd = s_pidfd,
    .signal = s_signal,
    .kill = s_kill,
    .reap = s_reap,
    .build_env = s_build_env,
    .adopt_file = s_adopt_file,
    .destroy = s_destroy,
};

kb_launcher_t *
kb_warm_launcher(kb_warm_t **pw, err_t *err)
{
    kb_warm_t *w = *pw;
    if (kb_warm_poll(w, 0) != KB_WARM_READY) {
        err_set(err, ERR_KERNEL, "warm kernel not ready%s%s",
                w->error[0] ? ": " : "", w->error);
        return NULL;
    }
    /* A session's kernel runs at full priority. */
    sb_sandbox_set_cpu_weight(w->box, 100);
    if (w->factory)
        kb_factory_foreground(w->factory, w->kpid);
    kb_launcher_t *l = xcalloc(1, sizeof *l);
    l->ops = &s_ops;
    l->self = w;
    *pw = NULL;
    return l;
}

sb_sandbox_t *
kb_launcher_warm_box(kb_launcher_t *l)
{
    return l && l->ops == &s_ops ? ((kb_warm_t *)l->self)->box : NULL;
}

pid_t
kb_launcher_warm_kernel_pid(kb_launcher_t *l)
{
    return l && l->ops == &s_ops ? kb_warm_kernel_pid(l->self) : -1;
}

bool
kb_launcher_warm_handed_over(kb_launcher_t *l)
{
    return l && l->ops == &s_ops && ((kb_warm_t *)l->self)->handed_over;
}
