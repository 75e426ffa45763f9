/* sb_gvisor: the gVisor engine (sb_engine.h): a box's plan run by runsc.
 *
 * At spawn: the plan becomes an OCI bundle (sb_oci.c) under the box's top
 * dir, with its own runsc root (state) there too; a child of ours enters
 * a private mount namespace, mounts the workspace tmpfs (size-capped,
 * visible to no other host process, gone with the last process in that
 * namespace), hands us its fd (the same copy-in and copy-out as the
 * namespaces engine), and execs `runsc run` inside the box's cgroup
 * (runsc --ignore-cgroups: the Sentry, the gofer and every task of the
 * box are charged to the cgroup we made). The box's pid 1 is our relay
 * (sb_gvisor_relay.py), which holds the box's only host connection.
 * runsc does not forward signals to the container; they go through the
 * relay. Teardown: SIGKILL to runsc and the cgroup; the top dir (bundle,
 * runsc state, relay socket) is removed with the box. */
#include "sandbox/sb_gvisor.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/escape.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_engine.h"
#include "sandbox/sb_pysrc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

/* The host pids cgroup counts host threads: the Sentry's Go runtime, the
 * gofer and, under ptrace, stub processes and threads for the tasks
 * (measured with runsc 20221219: ~140 at rest, ~3.5 more per task). The
 * tasks inside are held to --pids by gVisor's RLIMIT_NPROC (fork and
 * clone fail with EAGAIN, as on Linux); the cgroup is set well above
 * what that many tasks need, as the backstop, so the box is not killed
 * before gVisor refuses the task. */
#define S_RUNSC_THREADS 192
#define S_HOST_THREADS_PER_TASK 6

int
sb_gv_prepare(sb_sandbox_t *sb, err_t *err)
{
    if (sb->root_mode == false)
        return err_set(err, ERR_SANDBOX,
                       "--engine gvisor needs root: Debian's runsc starts "
                       "its Sentry and gofer with namespaces and chroot that "
                       "an unprivileged user cannot make (runsc --rootless "
                       "serves only 'runsc do'); run as root, or use "
                       "--engine namespaces");
    struct sb_gv *g = xcalloc(1, sizeof *g);
    g->mntns = g->stdio[0] = g->stdio[1] = g->stdio[2] = -1;
    sb->gv = g;
    g->runsc = sb_gvisor_find_runsc(err);
    if (!g->runsc)
        return -1;
    g->dir = xasprintf("%s/gv", sb->top_dir);
    g->relay_dir = xasprintf("%s/relay", sb->top_dir);
    if (mkdir(g->dir, 0700) < 0 || mkdir(g->relay_dir, 0755) < 0 ||
        mkdir(sb->sock_dir, 0700) < 0)
        return err_errno(err, ERR_SANDBOX, "sandbox: preparing %s", g->dir);
    const char *pd = sb_cgroup_dir(sb->cg, "pids");
    if (pd) {
        char *path = xasprintf("%s/pids.max", pd);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%u",
                    S_RUNSC_THREADS +
                        sb->policy.pids * S_HOST_THREADS_PER_TASK);
            fclose(f);
        }
        free(path);
    }
    return 0;
}

void
sb_gv_release(sb_sandbox_t *sb)
{
    struct sb_gv *g = sb->gv;
    if (!g)
        return;
    sb_gv_relay_destroy(&g->relay);
    sb_gv_forget_stdio(g);
    if (g->mntns >= 0)
        close(g->mntns);
    free(g->runsc);
    free(g->dir);
    free(g->relay_dir);
    free(g);
    sb->gv = NULL;
}

int
sb_gv_signal(sb_sandbox_t *sb, int sig)
{
    if (sig == SIGKILL)
        return sb_sandbox_kill(sb);
    if (!sb->gv->relay) {
        errno = ESRCH;
        return -1;
    }
    return sb_gv_relay_signal(sb->gv->relay, sig);
}

int
sb_gv_status(const sb_sandbox_t *sb)
{
    if (!sb->gv || !sb->gv->relay)
        return -1;
    /* The relay's last frame may still be on its way to our thread. */
    for (int i = 0; i < 100; i++) {
        int st = sb_gv_relay_status(sb->gv->relay);
        if (st >= 0 || sb_gv_relay_gone(sb->gv->relay))
            return st;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return sb_gv_relay_status(sb->gv->relay);
}

/* What the child needs, prepared before clone (no allocation after). */
struct s_gvchild {
    int ctl;
    int stdio[3];
    const char *ws_host;
    const char *ws_data;
    const char *runsc;
    char *const *argv;
    char *const *envp;
    const sigset_t *mask;
    int mntns; /* restore: the namespace the workspace is mounted in */
};

static _Noreturn void
s_child_die(const struct s_gvchild *c, const char *step)
{
    sb_box_send(c->ctl, MSG_ERROR, ERR_SANDBOX, errno, 0, step, NULL, -1);
    _exit(126);
}

static _Noreturn void
s_child(const struct s_gvchild *c)
{
    sb_detach_child(c->mask);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    struct s_msg m;
    if (sb_box_recv(c->ctl, &m, NULL) != MSG_GO)
        _exit(125);
    if (c->mntns >= 0) { /* restore: the workspace is already mounted */
        if (setns(c->mntns, CLONE_NEWNS) < 0)
            s_child_die(c, "enter the paused box's mount namespace");
        goto stdio;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        s_child_die(c, "make the mounts of runsc's namespace private");
    if (mount("tmpfs", c->ws_host, "tmpfs", MS_NOSUID | MS_NODEV, c->ws_data) <
        0)
        s_child_die(c, "mount the workspace tmpfs");
    int ws = open(c->ws_host, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ws < 0)
        s_child_die(c, "open the workspace");
    sb_box_send(c->ctl, MSG_WORKSPACE, 0, 0, 0, NULL, NULL, ws);
    close(ws);
    if (sb_box_recv(c->ctl, &m, NULL) != MSG_FILES_DONE)
        _exit(125);
stdio:;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++) {
        int src = c->stdio[fd] >= 0 ? c->stdio[fd] : null;
        if (src < 0 || dup3(src, fd + 100, O_CLOEXEC) < 0)
            s_child_die(c, "set up runsc's stdio");
    }
    for (int fd = 0; fd < 3; fd++)
        if (dup2(fd + 100, fd) < 0)
            s_child_die(c, "set up runsc's stdio");
    int keep[1] = {c->ctl};
    sb_box_close_others(keep, 1); /* the mntns fd too: it is CLOEXEC */
    execve(c->runsc, c->argv, c->envp);
    s_child_die(c, "exec runsc");
}

/* runsc's own reason for failing (its log's last lines), escaped. */
char *
sb_gv_runsc_reason(const struct sb_gv *g)
{
    char *path = xasprintf("%s/runsc.log", g->dir);
    FILE *f = fopen(path, "r");
    free(path);
    buf_t b;
    buf_init(&b, 4096);
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        if (!strstr(line, "FATAL") && !strstr(line, "rror") &&
            !strstr(line, "failed"))
            continue;
        /* a checkpoint that met something gVisor cannot save */
        const char *enc = strstr(line, "encoding error at object ");
        if (enc) {
            enc += strlen("encoding error at object ");
            size_t n = strcspn(enc, "{( \\\"");
            buf_reset(&b);
            buf_puts(&b, "gVisor cannot save a ");
            esc_append(&b, enc, n > 80 ? 80 : n, ESC_NAME);
            buf_puts(&b, " in the box (runsc: encoding error)");
            break;
        }
        buf_reset(&b);
        line[strcspn(line, "\n")] = '\0';
        /* runsc logs JSON lines: {"msg": ..., "level": ...} */
        json_t *j = line[0] == '{' ? json_loads(line, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(j, "msg"));
        esc_append(&b, msg ? msg : line, strlen(msg ? msg : line), ESC_NAME);
        json_decref(j);
    }
    if (f)
        fclose(f);
    char *s = b.len ? xstrdup(buf_cstr(&b)) : xstrdup("no reason logged");
    buf_release(&b);
    return s;
}

/* gVisor imports the container's fds 1 and 2 as two host files with an
 * offset each: one file for both (2>&1, a kernel's stderr memfd) would
 * see each overwrite the other, so the relay gives the program one
 * description for both instead. */
static bool
s_same_file(int a, int b)
{
    struct stat sa, sb;
    return a >= 0 && b >= 0 && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
           S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

void
sb_gv_abort(sb_sandbox_t *sb)
{
    syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    sb_cgroup_kill(sb->cg);
    siginfo_t si;
    waitid((idtype_t)P_PIDFD, (id_t)sb->pidfd, &si, WEXITED);
    sb->state = ST_REAPED;
}

char **
sb_gv_runsc_argv(const struct sb_gv *g, int *k)
{
    char **v = xcalloc(24, sizeof *v);
    int n = 0;
    v[n++] = xstrdup(g->runsc);
    v[n++] = xasprintf("--root=%s/state", g->dir);
    v[n++] = xasprintf("--platform=%s", sb_gvisor_platform());
    v[n++] = xstrdup("--network=none");
    v[n++] = xstrdup("--host-uds=open");
    v[n++] = xstrdup("--ignore-cgroups");
    v[n++] = xasprintf("--log=%s/runsc.log", g->dir);
    /* For bug reports: runsc's own debug logs into this directory. */
    const char *dbg = getenv("JUPYTER_AGENT_RUNSC_DEBUG_DIR");
    if (dbg && dbg[0] == '/') {
        v[n++] = xstrdup("--debug");
        v[n++] = xstrdup("--strace");
        v[n++] = xasprintf("--debug-log=%s/", dbg);
    }
    *k = n;
    return v;
}

void
sb_gv_forget_stdio(struct sb_gv *g)
{
    for (int i = 0; i < 3; i++) {
        if (g->stdio[i] >= 0)
            close(g->stdio[i]);
        g->stdio[i] = -1;
    }
}

/* Start `rargv` (runsc run or restore) in the box's cgroup and wait for
 * the box's relay to say hello. Restoring, runsc enters the mount
 * namespace the workspace is mounted in (g->mntns) and nothing is copied
 * in. 0, or -1 with the box killed. */
static int
s_run_runsc(sb_sandbox_t *sb, char **rargv, const char *ws_host,
            const char *ws_data, int old_ws, bool restoring, err_t *err)
{
    struct sb_gv *g = sb->gv;
    int rc = -1, sv[2] = {-1, -1};
    char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char *renv[] = {path_env, NULL};

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: socketpair");
        goto out;
    }
    sigset_t mask;
    struct s_gvchild c = {.ctl = sv[1],
                          .stdio = {g->stdio[0], g->stdio[1], g->stdio[2]},
                          .ws_host = ws_host,
                          .ws_data = ws_data,
                          .runsc = g->runsc,
                          .argv = rargv,
                          .envp = renv,
                          .mask = &mask,
                          .mntns = restoring ? g->mntns : -1};
    int pidfd = -1;
    struct s_clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_NEWNS | CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)&pidfd;
    ca.exit_signal = SIGCHLD;
    sb_detach_block(&mask);
    long pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0)
        s_child(&c);
    sb_detach_restore(&mask);
    if (pid < 0) {
        err_errno(err, ERR_SANDBOX,
                  "sandbox: starting runsc in a mount namespace of its own");
        goto out;
    }
    close(sv[1]);
    sv[1] = -1;
    sb->pid = (pid_t)pid;
    sb->pidfd = pidfd;
    sb->ctl = sv[0];
    sv[0] = -1;
    sb->state = ST_RUNNING;
    if (sb_cgroup_enter(sb->cg, sb->pid, err) < 0) {
        sb_gv_abort(sb);
        goto out;
    }
    struct s_msg go = {.type = MSG_GO};
    send(sb->ctl, &go, sizeof go, MSG_NOSIGNAL);
    struct s_msg m;
    if (restoring)
        goto wait_relay;
    int passed = -1;
    int t = sb_box_recv(sb->ctl, &m, &passed);
    if (t != MSG_WORKSPACE || passed < 0) {
        if (t == MSG_ERROR)
            err_errnum(err, ERR_SANDBOX, m.errnum, "sandbox: %s", m.text);
        else
            err_set(err, ERR_SANDBOX, "sandbox: runsc's launcher died");
        if (passed >= 0)
            close(passed);
        sb_gv_abort(sb);
        goto out;
    }
    /* The workspace stays mounted in runsc's mount namespace while the
     * box is paused (no process left in it): restore enters it again. */
    char nsp[64];
    snprintf(nsp, sizeof nsp, "/proc/%d/ns/mnt", (int)sb->pid);
    if (g->mntns >= 0)
        close(g->mntns);
    g->mntns = open(nsp, O_RDONLY | O_CLOEXEC);
    if (sb_box_take_workspace(sb, passed, old_ws, err) < 0) {
        sb_gv_abort(sb);
        goto out;
    }
    struct s_msg done = {.type = MSG_FILES_DONE};
    send(sb->ctl, &done, sizeof done, MSG_NOSIGNAL);
wait_relay:;
    int64_t deadline = clock_mono_ms() + SETUP_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            err_set(err, ERR_SANDBOX,
                    "sandbox: gVisor did not start the program within %d s; "
                    "killed",
                    SETUP_TIMEOUT_MS / 1000);
            sb_gv_abort(sb);
            goto out;
        }
        struct pollfd pf[3] = {
            {.fd = sb_gv_relay_ready_fd(g->relay), .events = POLLIN},
            {.fd = sb->pidfd, .events = POLLIN},
            {.fd = sb->ctl, .events = POLLIN}};
        int pr = poll(pf, 3, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0) {
            err_errno(err, ERR_SANDBOX, "sandbox: waiting for gVisor");
            sb_gv_abort(sb);
            goto out;
        }
        if (pf[0].revents & POLLIN) {
            rc = 0;
            goto out;
        }
        if (pf[2].revents) {
            int fd = -1;
            int got = sb_box_recv(sb->ctl, &m, &fd);
            if (got <= 0) { /* runsc was exec'ed: its end closed */
                close(sb->ctl);
                sb->ctl = -1;
            } else if (got == MSG_ERROR) {
                err_errnum(err, ERR_SANDBOX, m.errnum, "sandbox: %s", m.text);
                sb_gv_abort(sb);
                goto out;
            }
            if (fd >= 0)
                close(fd);
        }
        if (pf[1].revents & POLLIN) {
            char *why = sb_gv_runsc_reason(g);
            err_set(err, ERR_SANDBOX,
                    "sandbox: runsc could not %s the gVisor sandbox "
                    "(platform %s): %s",
                    restoring ? "restore" : "start", sb_gvisor_platform(), why);
            free(why);
            sb_gv_abort(sb);
            goto out;
        }
    }
out:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    return rc;
}

int
sb_gv_restore(sb_sandbox_t *sb, char **rargv, err_t *err)
{
    return s_run_runsc(sb, rargv, NULL, NULL, -1, true, err);
}

int
sb_gv_spawn(sb_sandbox_t *sb, char *const argv[], char *const envp[],
            int stdout_fd, int stderr_fd, err_t *err)
{
    struct sb_gv *g = sb->gv;
    if (g->paused)
        return err_set(err, ERR_USAGE,
                       "sandbox: box %s is paused; resume it before starting "
                       "a program in it",
                       sb->id);
    if (sb->nest || sb->allow_setns)
        return err_set(err, ERR_USAGE, "%s",
                       sb_engine_nesting_gap(SB_ENGINE_GVISOR));
    int rc = -1;
    struct s_plan plan = {0};
    char **rargv = NULL;
    int old_ws = sb_box_spawn_begin(sb);
    sb_gv_relay_destroy(&g->relay);

    char *ws_host = xasprintf("%s/ws", g->dir);
    char *state = xasprintf("%s/state", g->dir);
    char *relay = xasprintf("%s/relay", g->relay_dir);
    char *log = xasprintf("%s/runsc.log", g->dir);
    char *id = xasprintf("ja-%s", sb->id);
    char *ws_data = xasprintf("size=%llu,mode=0755,uid=%u,gid=%u",
                              (unsigned long long)sb->policy.workspace_bytes,
                              SB_SANDBOX_UID, SB_SANDBOX_UID);
    sb_files_remove_tree(state);
    unlink(log);
    if ((mkdir(ws_host, 0755) < 0 && errno != EEXIST) ||
        mkdir(state, 0700) < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: preparing %s", g->dir);
        goto out;
    }
    g->relay = sb_gv_relay_new(relay, sb->sock_dir, err);
    if (!g->relay)
        goto out;
    sb_box_plan_build(sb, &plan);
    sb_oci_args_t a = {.bundle = g->dir,
                       .ws_host = ws_host,
                       .relay_dir = g->relay_dir,
                       .relay_script = sb_gvisor_relay_py,
                       .relay_len = sb_gvisor_relay_py_len,
                       .argv = argv,
                       .envp = envp,
                       .merge_stdio = s_same_file(stdout_fd, stderr_fd)};
    if (sb_oci_write_bundle(sb, &plan, &a, err) < 0)
        goto out;
    int k = 0;
    rargv = sb_gv_runsc_argv(g, &k);
    rargv[k++] = xstrdup("run");
    rargv[k++] = xasprintf("--bundle=%s", g->dir);
    rargv[k++] = xstrdup(id);
    int stdio[3] = {sb->stdin_fd, stdout_fd, stderr_fd};
    sb_gv_forget_stdio(g);
    for (int i = 0; i < 3; i++)
        g->stdio[i] = stdio[i] >= 0 ? fcntl(stdio[i], F_DUPFD_CLOEXEC, 3) : -1;
    rc = s_run_runsc(sb, rargv, ws_host, ws_data, old_ws, false, err);
out:
    sb_box_spawn_end(sb, rc, old_ws);
    strv_free(rargv);
    sb_box_plan_release(&plan);
    free(ws_host);
    free(state);
    free(relay);
    free(log);
    free(id);
    free(ws_data);
    return rc;
}
