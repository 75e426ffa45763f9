/*
 * sb_sandbox: clone into namespaces, build the filesystem, drop
 * privileges, seccomp, exec; init as pid 1; host-side bookkeeping.
 *
 * Order (after nsjail and bubblewrap):
 *   parent: run dir + cgroup (sb_sandbox_new); at spawn: compile seccomp,
 *           plan the mounts, clone3(NEWUSER|NEWPID|NEWNET|NEWNS|NEWIPC|
 *           NEWUTS, PIDFD); put the child in the cgroup; write setgroups
 *           and uid/gid maps; release it ("GO").
 *   pid 1:  close inherited fds; identity inside (uid 0 when we are root);
 *           PDEATHSIG; new cgroup ns; hostname; lo up; mounts on a tmpfs
 *           root (plan), hand the workspace fd to the parent, which copies
 *           files in; pivot_root, detach the old root, "/" read-only;
 *           build the Landlock ruleset (sb_landlock.h) on the final
 *           tree; fork the program; drop its own capabilities; Landlock;
 *           seccomp; report
 *           exec success or the failed step; reap and forward signals.
 *   child:  default signals, setsid, stdio, rlimits, drop the bounding
 *           set, uid/gid 1000, empty capabilities, NO_NEW_PRIVS,
 *           PDEATHSIG (+ getppid check), every other fd close-on-exec,
 *           Landlock, seccomp last, execve.
 *
 * The code between clone and exec runs in a copy of a possibly
 * multi-threaded process: it must not allocate, lock or use stdio. It
 * uses raw system calls (identity changes too: glibc's setresuid would
 * try to signal threads that do not exist here) and only reads data the
 * parent prepared (struct s_child, the mount plan, the BPF program).
 */
#include "sandbox/sb_sandbox.h"
#include "sandbox/sb_egress_proxy.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sandbox/sb_cgroup.h"
#include "sandbox/sb_drop.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_landlock.h"
#include "sandbox/sb_seccomp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

/* Where run dirs go: $XDG_RUNTIME_DIR when we may write there and the
 * box's host uid/gid may pass through it (as root the box runs as another
 * uid, and systemd makes /run/user/0 mode 0700), else /tmp. */
static const char *
s_tmp_base(uid_t box_uid, gid_t box_gid)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (!x || x[0] != '/' || strlen(x) >= 40 || access(x, W_OK | X_OK) < 0 ||
        stat(x, &st) < 0 || !S_ISDIR(st.st_mode))
        return "/tmp";
    mode_t pass = st.st_uid == box_uid   ? S_IXUSR
                  : st.st_gid == box_gid ? S_IXGRP
                                         : S_IXOTH;
    return st.st_mode & pass ? x : "/tmp";
}

/* Remove run dirs of launchers that died without sb_sandbox_destroy():
 * ours (owned by `uid`), older than a quarter of an hour, and not locked
 * (every live sandbox holds an flock on its top dir; flock works across
 * pid namespaces, where a pid check would not). Best effort. */
static void
s_gc_run_dirs(const char *base, uid_t uid)
{
    DIR *d = opendir(base);
    struct dirent *de;
    time_t now = time(NULL);
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "ja-sb-", 6) != 0)
            continue;
        int fd = openat(dirfd(d), de->d_name,
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_uid == uid &&
            now - st.st_ctime > 15 * 60 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
            char *path = xasprintf("%s/%s", base, de->d_name);
            sb_files_remove_tree(path);
            free(path);
        }
        close(fd);
    }
    if (d)
        closedir(d);
}

sb_sandbox_t *
sb_sandbox_new(const sb_policy_t *p, err_t *err)
{
    sb_sandbox_t *sb = xcalloc(1, sizeof *sb);
    sb_policy_copy(&sb->policy, p);
    buf_init(&sb->warnings, 8192);
    sb->pid = -1;
    sb->pidfd = sb->ctl = sb->cmd = sb->ws_fd = sb->stdin_fd = sb->lock_fd = -1;
    sb->sock_fd = -1;
    sb->egress_pid = -1;
    sb->egress_life = sb->egress_rules = -1;
    pthread_mutex_init(&sb->egress_mu, NULL);
    sb->root_mode = geteuid() == 0;
    sb->host_uid =
        sb->root_mode ? SB_ROOT_HOST_BASE + SB_SANDBOX_UID : geteuid();
    sb->host_gid =
        sb->root_mode ? SB_ROOT_HOST_BASE + SB_SANDBOX_UID : getegid();
    bool gvisor = p->engine == SB_ENGINE_GVISOR;
    if (p->engine == SB_ENGINE_BAD) {
        err_set(err, ERR_USAGE,
                "JUPYTER_AGENT_ENGINE='%s' is not an engine; set it to "
                "namespaces or gvisor, or unset it",
                getenv("JUPYTER_AGENT_ENGINE") ? getenv("JUPYTER_AGENT_ENGINE")
                                               : "");
        goto fail;
    }
    if (gvisor && p->allow_net) {
        err_set(err, ERR_USAGE,
                "--allow-net is not supported yet with --engine gvisor "
                "(the box's relay to the proxy is not built for runsc: "
                "docs/egress.md); use the namespaces engine for a box with "
                "network by name");
        goto fail;
    }
    /* gVisor's gofer writes the box's files as the box's own uid 1000;
     * the top dir stays root's (0700), so no host user 1000 gets in. */
    if (gvisor)
        sb->host_uid = sb->host_gid = SB_SANDBOX_UID;
    for (size_t i = 0; i < p->n_binds; i++) {
        if (access(p->binds[i].host, F_OK) < 0) {
            err_errno(err, ERR_USAGE, "--bind: '%s'", p->binds[i].host);
            goto fail;
        }
    }
    const char *base = s_tmp_base(sb->host_uid, sb->host_gid);
    s_gc_run_dirs(base, sb->host_uid);
    sb->top_dir = xasprintf("%s/ja-sb-XXXXXX", base);
    if (!mkdtemp(sb->top_dir)) {
        err_errno(err, ERR_SANDBOX, "sandbox: creating %s", sb->top_dir);
        free(sb->top_dir);
        sb->top_dir = NULL;
        goto fail;
    }
    /* Held while we live; a run dir nobody holds is stale (see s_gc). */
    sb->lock_fd = open(sb->top_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sb->lock_fd >= 0)
        flock(sb->lock_fd, LOCK_EX);
    sb->run_dir = xasprintf("%s/run", sb->top_dir);
    sb->sock_dir = xasprintf("%s/sock", sb->top_dir);
    if (mkdir(sb->run_dir, 0700) < 0 ||
        (sb->root_mode &&
         ((!gvisor && chown(sb->top_dir, sb->host_uid, sb->host_gid) < 0) ||
          chown(sb->run_dir, sb->host_uid, sb->host_gid) < 0))) {
        err_errno(err, ERR_SANDBOX, "sandbox: preparing run dir %s",
                  sb->run_dir);
        goto fail;
    }
    snprintf(sb->id, sizeof sb->id, "%d-%s", (int)getpid(),
             strrchr(sb->top_dir, '-') + 1);
    sb->cg = sb_cgroup_new(&sb->policy, sb->id);
    if (sb_cgroup_warning(sb->cg))
        buf_puts(&sb->warnings, sb_cgroup_warning(sb->cg));
    if (gvisor)
        return sb_gv_prepare(sb, err) < 0 ? (sb_sandbox_destroy(&sb), NULL)
                                          : sb;
    const char *gap = sb_landlock_gap(sb_landlock_abi());
    if (gap)
        buf_printf(&sb->warnings, "%s%s", sb->warnings.len ? "; " : "", gap);
    return sb;
fail:
    sb_sandbox_destroy(&sb);
    return NULL;
}

static int
s_write_proc(pid_t pid, const char *file, const char *text, err_t *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n = -1;
    if (fd >= 0) {
        n = write(fd, text, strlen(text));
        int e = errno;
        close(fd);
        errno = e;
    }
    if (n != (ssize_t)strlen(text))
        return err_errno(err, ERR_SANDBOX, "sandbox: writing %s", path);
    return 0;
}

static int
s_write_maps(sb_sandbox_t *sb, err_t *err)
{
    char map[128];
    if (sb->root_mode) {
        snprintf(map, sizeof map, "0 %u 1\n%u %u 1\n", SB_ROOT_HOST_BASE,
                 SB_SANDBOX_UID, SB_ROOT_HOST_BASE + SB_SANDBOX_UID);
        if (s_write_proc(sb->pid, "uid_map", map, err) < 0 ||
            s_write_proc(sb->pid, "gid_map", map, err) < 0)
            return -1;
        return 0;
    }
    if (s_write_proc(sb->pid, "setgroups", "deny", err) < 0)
        return -1;
    snprintf(map, sizeof map, "%u %u 1\n", SB_SANDBOX_UID, (unsigned)geteuid());
    if (s_write_proc(sb->pid, "uid_map", map, err) < 0)
        return -1;
    snprintf(map, sizeof map, "%u %u 1\n", SB_SANDBOX_UID, (unsigned)getegid());
    return s_write_proc(sb->pid, "gid_map", map, err);
}

static void
s_parent_send(int fd, int type)
{
    struct s_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    while (send(fd, &m, sizeof m, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static int
s_copy_files_in(sb_sandbox_t *sb, err_t *err)
{
    uid_t owner = sb->root_mode ? sb->host_uid : (uid_t)-1;
    for (size_t i = 0; i < sb->n_files; i++)
        if (sb_files_copy_in(sb->ws_fd, sb->files[i].host, sb->files[i].name,
                             sb->policy.workspace_bytes, owner, sb->host_gid,
                             err) < 0)
            return err_prefix(err, "sandbox: --file");
    return 0;
}

int
sb_box_spawn_begin(sb_sandbox_t *sb)
{
    int old_ws = sb->ws_fd; /* carried over into the new box */
    sb->ws_fd = -1;
    if (sb->ctl >= 0)
        close(sb->ctl);
    if (sb->cmd >= 0)
        close(sb->cmd);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    sb->ctl = sb->cmd = sb->pidfd = -1;
    sb->pid = -1;
    sb->killed = sb->finished = false;
    memset(&sb->exit, 0, sizeof sb->exit);
    sb->oom_base = sb_cgroup_oom_kills(sb->cg);
    return old_ws;
}

void
sb_box_spawn_end(sb_sandbox_t *sb, int rc, int old_ws)
{
    if (old_ws >= 0 && sb->ws_fd >= 0)
        close(old_ws);
    else if (old_ws >= 0)
        sb->ws_fd = old_ws; /* failed early: keep the old workspace */
    if (rc == 0) {          /* staged files are in now */
        for (size_t i = 0; i < sb->n_files; i++) {
            free(sb->files[i].host);
            free(sb->files[i].name);
        }
        sb->n_files = 0;
    }
}

int
sb_box_take_workspace(sb_sandbox_t *sb, int passed, int old_ws, err_t *err)
{
    sb->ws_fd = passed;
    snprintf(sb->ws_path, sizeof sb->ws_path, "/proc/self/fd/%d", passed);
    if (old_ws >= 0 &&
        sb_files_copy_tree(old_ws, passed, sb->policy.workspace_bytes,
                           sb->root_mode ? sb->host_uid : (uid_t)-1,
                           sb->host_gid, err) < 0)
        return err_prefix(err, "sandbox: carrying /mnt/data over");
    return s_copy_files_in(sb, err);
}

/* clone3 `ca` nested in the box `outer` (see
 * sb_box_nest_helper). Returns the box's host pid with *pidfd set, or -1 with
 * err set. */
static long
s_clone_nested(const sb_sandbox_t *outer, const struct s_clone_args *ca,
               const struct s_child *c, int *pidfd, err_t *err)
{
    int sp[2], fds[2] = {-1, -1}, n = 0, nsfd[2] = {-1, -1};
    long pid = -1;
    /* The outer box's namespaces, from its program: its init is not
     * dumpable, so only a privileged launcher could open init's. */
    pid_t prog = sb_sandbox_program_pid(outer);
    const char *ns[2] = {"user", "pid"};
    for (int i = 0; i < 2; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)prog, ns[i]);
        nsfd[i] = prog > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (nsfd[i] < 0) {
            err_set(err, ERR_SANDBOX,
                    "sandbox: opening the outer box's %s namespace: %s", ns[i],
                    prog > 0 ? strerror(errno) : "its program is gone");
            if (i)
                close(nsfd[0]);
            return -1;
        }
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        close(nsfd[0]);
        close(nsfd[1]);
        return err_errno(err, ERR_SANDBOX, "sandbox: socketpair");
    }
    long h1 = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (h1 == 0) {
        close(sp[0]);
        sb_box_nest_helper(nsfd, ca, c, sp[1]);
    }
    close(sp[1]);
    close(nsfd[0]);
    close(nsfd[1]);
    struct s_msg m = {0};
    while (h1 > 0 && n < 2) {
        int t = sb_box_recv(sp[0], &m, &fds[n]);
        if (t != MSG_NEST_PIDFD || fds[n] < 0)
            break;
        n++;
    }
    if (h1 > 0)
        waitpid((pid_t)h1, NULL, 0);
    if (fds[0] >= 0) { /* the second helper, also our child */
        siginfo_t si;
        waitid((idtype_t)P_PIDFD, (id_t)fds[0], &si, WEXITED);
        close(fds[0]);
    }
    if (n == 2)
        pid = sb_pidfd_pid(fds[1]);
    if (pid > 0) {
        *pidfd = fds[1];
    } else {
        if (fds[1] >= 0) {
            syscall(SYS_pidfd_send_signal, fds[1], SIGKILL, NULL, 0);
            siginfo_t si;
            waitid((idtype_t)P_PIDFD, (id_t)fds[1], &si, WEXITED);
            close(fds[1]);
        }
        if (m.type == MSG_ERROR)
            err_errnum(err, ERR_SANDBOX, m.errnum, "sandbox: %s", m.text);
        else
            err_set(err, ERR_SANDBOX,
                    "sandbox: creating a box nested in another failed%s",
                    h1 < 0 ? " (fork)" : "");
        pid = -1;
    }
    close(sp[0]);
    return pid;
}

static void
s_abort_spawn(sb_sandbox_t *sb)
{
    syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    sb_box_reap(sb, true);
    sb->state = ST_REAPED;
}

/* The box's socket dir reaches the host as top_dir/sock, a symlink to
 * /proc/<our pid>/fd/<sock_fd>: any process of ours (a serve client too)
 * can connect to the sockets in it, yet every byte the box writes there
 * is in its own small tmpfs, never on host storage. The fd number stays
 * the same across restarts, so the link is made once. */
static int
s_link_sock_dir(sb_sandbox_t *sb, int passed, err_t *err)
{
    if (sb->sock_fd >= 0) {
        int r = dup3(passed, sb->sock_fd, O_CLOEXEC);
        close(passed);
        if (r < 0)
            return err_errno(err, ERR_SANDBOX, "sandbox: socket dir");
        return 0;
    }
    sb->sock_fd = passed;
    char target[64];
    snprintf(target, sizeof target, "/proc/%d/fd/%d", (int)getpid(), passed);
    char *tmp = xasprintf("%s.new", sb->sock_dir);
    unlink(tmp);
    int rc = 0;
    if (symlink(target, tmp) < 0 || rename(tmp, sb->sock_dir) < 0)
        rc = err_errno(err, ERR_SANDBOX, "sandbox: linking %s to %s",
                       sb->sock_dir, target);
    unlink(tmp);
    free(tmp);
    return rc;
}

const char *
sb_sandbox_sock_dir(const sb_sandbox_t *sb)
{
    return sb->sock_dir;
}

int
sb_sandbox_add_box_file(sb_sandbox_t *sb, const char *host_path,
                        const char *name, err_t *err)
{
    if (sb_files_check_name(name, err) < 0)
        return -1;
    struct stat st;
    if (stat(host_path, &st) < 0 || !S_ISREG(st.st_mode))
        return err_set(err, ERR_USAGE, "sandbox: '%s' is not a regular file",
                       host_path);
    for (size_t i = 0; i < sb->n_box_files; i++)
        if (strcmp(sb->box_files[i].name, name) == 0) {
            free(sb->box_files[i].host);
            sb->box_files[i].host = xstrdup(host_path);
            return 0;
        }
    sb->box_files =
        xrealloc(sb->box_files, (sb->n_box_files + 1) * sizeof *sb->box_files);
    sb->box_files[sb->n_box_files].host = xstrdup(host_path);
    sb->box_files[sb->n_box_files].name = xstrdup(name);
    sb->n_box_files++;
    return 0;
}

int
sb_sandbox_spawn(sb_sandbox_t *sb, char *const argv[], char *const envp[],
                 int stdout_fd, int stderr_fd, err_t *err)
{
    if (sb->state == ST_RUNNING)
        return err_set(err, ERR_SANDBOX,
                       "sandbox: already running; kill and wait first");
    if (!argv || !argv[0] || argv[0][0] != '/' || !envp)
        return err_set(err, ERR_USAGE,
                       "sandbox: the program must be an absolute path inside "
                       "the box (got '%s')",
                       argv && argv[0] ? argv[0] : "");
    if (sb->gv)
        return sb_gv_spawn(sb, argv, envp, stdout_fd, stderr_fd, err);
    if (sb_box_egress_ca(sb, err) < 0) /* before the plan: the box's bundle */
        return -1;
    int rc = -1, sv[2] = {-1, -1}, cv[2] = {-1, -1};
    struct s_plan plan = {0};
    sb_seccomp_prog_t prog, audit_prog = {0};
    if (sb_seccomp_build_allowing(&prog, sb->allow_setns ? "setns" : NULL,
                                  err) < 0)
        return -1;
    if (sb->policy.seccomp_audit &&
        sb_seccomp_build_mode(&audit_prog, true, err) < 0) {
        sb_seccomp_prog_release(&prog);
        return -1;
    }
    bool nested = sb->nest != NULL;
    /* A new box after the last one ended: carry its workspace over. */
    int old_ws = sb_box_spawn_begin(sb);
    sb_box_plan_build(sb, &plan);
    sb_landlock_plan_t *landlock = xmalloc(sizeof *landlock);
    /* Not for the kernel factory's box (allow_setns): its program enters
     * nested boxes whose tmpfs a domain made here could not cover; each
     * kernel it forks applies its own box's rules (kb_zygote.py). */
    sb_landlock_plan_box(
        landlock,
        sb_box_knobs()->no_landlock || sb->allow_setns ? 0 : sb_landlock_abi(),
        &sb->policy, sb->top_dir); /* run (read-only mount) and sock */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cv) < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: socketpair");
        goto out;
    }
    const sb_policy_t *p = &sb->policy;
    /* --allow-net: where the relay finds the proxy (same path inside). */
    char egress_sock[108];
    if (p->allow_net &&
        (size_t)snprintf(egress_sock, sizeof egress_sock, "%s/%s", sb->sock_dir,
                         SB_EGRESS_SOCK) >= sizeof egress_sock) {
        err_set(err, ERR_SANDBOX,
                "--allow-net: the socket path %s/%s is longer than a Unix "
                "socket address allows; set TMPDIR to a shorter directory",
                sb->sock_dir, SB_EGRESS_SOCK);
        goto out;
    }
    struct s_child c = {
        .ctl = sv[1],
        .cmd = cv[1],
        .stdio = {sb->stdin_fd, stdout_fd, stderr_fd},
        .ctty = sb->stdin_ctty && sb->stdin_fd >= 0,
        .root_mode = sb->root_mode && !nested,
        .map_self = nested,
        .plan = &plan,
        .seccomp = sb->policy.seccomp_audit ? &audit_prog : &prog,
        .seccomp_init = &prog,
        .landlock = landlock,
        .share_net = sb_box_knobs()->share_netns,
        .argv = argv,
        .envp = envp,
        .hostname = "sandbox",
        .rl_nofile = {p->nofile, p->nofile},
        .rl_fsize = {sb_policy_fsize(p), sb_policy_fsize(p)},
        .rl_nproc = {p->pids, p->pids},
        .rl_data = {p->memory_bytes, p->memory_bytes},
        .limit_data = !sb_cgroup_limits_memory(sb->cg),
        .egress_sock =
            p->allow_net && !sb_box_knobs()->share_netns ? egress_sock : NULL,
    };
    /* Benchmark knobs: today's deny rows alone, or no filter at all. */
    sb_seccomp_prog_t deny_only = prog;
    deny_only.insns = (char *)prog.insns + prog.first_len * 8;
    deny_only.len = prog.len - prog.first_len;
    deny_only.first_len = 0;
    if (sb_box_knobs()->seccomp_deny_only)
        c.seccomp = c.seccomp_init = &deny_only;
    if (sb_box_knobs()->no_seccomp)
        c.seccomp = c.seccomp_init = NULL;
    int pidfd = -1;
    struct s_clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS |
               CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
    if (c.share_net)
        ca.flags &= ~(uint64_t)CLONE_NEWNET;
    ca.pidfd = (uint64_t)(uintptr_t)&pidfd;
    ca.exit_signal = SIGCHLD;
    /* Ctrl-C in the caller's terminal must not reach the box's init,
     * which would forward it to the program (sb_detach_block()). */
    sigset_t mask;
    sb_detach_block(&mask);
    c.sigmask = &mask;
    long pid = nested ? s_clone_nested(sb->nest, &ca, &c, &pidfd, err)
                      : syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0)
        sb_box_init(&c); /* never returns */
    sb_detach_restore(&mask);
    if (pid < 0 && nested)
        goto out;
    if (pid < 0) {
        err_set(err, ERR_SANDBOX,
                "sandbox: creating namespaces (clone3 with new user, pid, "
                "network and mount namespaces): %s; check that user "
                "namespaces are enabled (sysctl user.max_user_namespaces, "
                "kernel.unprivileged_userns_clone, AppArmor "
                "restrict_unprivileged_userns)",
                strerror(errno));
        goto out;
    }
    close(sv[1]);
    close(cv[1]);
    sv[1] = cv[1] = -1;
    sb->pid = (pid_t)pid;
    sb->pidfd = pidfd;
    sb->ctl = sv[0];
    sb->cmd = cv[0];
    sv[0] = cv[0] = -1;
    sb->state = ST_RUNNING;
    if (sb_cgroup_enter(sb->cg, sb->pid, err) < 0 ||
        (!nested && s_write_maps(sb, err) < 0)) {
        s_abort_spawn(sb);
        goto out;
    }
    s_parent_send(sb->ctl, MSG_GO);

    int64_t deadline = clock_mono_ms() + SETUP_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            err_set(err, ERR_SANDBOX,
                    "sandbox: setup did not finish within %d s; killed",
                    SETUP_TIMEOUT_MS / 1000);
            s_abort_spawn(sb);
            goto out;
        }
        struct pollfd pf = {.fd = sb->ctl, .events = POLLIN};
        int pr = poll(&pf, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        struct s_msg m;
        int passed = -1;
        int t = sb_box_recv(sb->ctl, &m, &passed);
        if (t == MSG_SOCKDIR && passed >= 0) {
            if (s_link_sock_dir(sb, passed, err) < 0 ||
                sb_box_egress_start(sb, err) < 0) {
                s_abort_spawn(sb);
                goto out;
            }
        } else if (t == MSG_WORKSPACE && passed >= 0) {
            if (sb_box_take_workspace(sb, passed, old_ws, err) < 0) {
                s_abort_spawn(sb);
                goto out;
            }
            s_parent_send(sb->ctl, MSG_FILES_DONE);
        } else if (t == MSG_ERROR) {
            err_errnum(err, m.code ? m.code : ERR_SANDBOX, m.errnum,
                       "sandbox: %s", m.text);
            s_abort_spawn(sb);
            goto out;
        } else if (t == MSG_LISTENER && passed >= 0) {
            if (!sb->audit)
                sb->audit = sb_seccomp_audit_new(err);
            if (!sb->audit ||
                sb_seccomp_audit_watch(sb->audit, passed, err) < 0) {
                if (!sb->audit)
                    close(passed);
                s_abort_spawn(sb); /* the program would wait forever */
                goto out;
            }
        } else if (t == MSG_RUNNING) {
            rc = 0;
            goto out;
        } else {
            if (passed >= 0)
                close(passed);
            sb_box_reap(sb, true);
            char how[128];
            err_set(err, ERR_SANDBOX,
                    "sandbox: init died during setup (%s); is something "
                    "(AppArmor, a container runtime) blocking namespaces?",
                    sb_exit_describe(&sb->exit, p, how, sizeof how));
            sb->state = ST_REAPED;
            goto out;
        }
    }
out:
    sb_box_spawn_end(sb, rc, old_ws);
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    for (int i = 0; i < 2; i++)
        if (cv[i] >= 0)
            close(cv[i]);
    sb_box_plan_release(&plan);
    free(landlock);
    sb_seccomp_prog_release(&prog);
    sb_seccomp_prog_release(&audit_prog);
    return rc;
}

void
sb_sandbox_destroy(sb_sandbox_t **pp)
{
    if (!pp || !*pp)
        return;
    sb_sandbox_t *sb = *pp;
    *pp = NULL;
    err_t err = {0};
    if (!sb->handed_off && sb_sandbox_finish(sb, &err) < 0)
        log_warn("%s", err.text); /* nobody asked (sb_sandbox_finish) */
    sb_box_egress_stop(sb);
    sb_box_egress_ca_free(sb);
    if (sb->ws_fd >= 0)
        close(sb->ws_fd);
    if (sb->sock_fd >= 0)
        close(sb->sock_fd);
    if (sb->ctl >= 0)
        close(sb->ctl);
    if (sb->cmd >= 0)
        close(sb->cmd);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    sb_seccomp_audit_destroy(&sb->audit);
    sb_gv_release(sb);
    if (sb->handed_off) {
        sb_cgroup_forget(&sb->cg); /* the reaper removes it */
    } else {
        sb_cgroup_destroy(&sb->cg);
        if (sb->top_dir)
            sb_files_remove_tree(sb->top_dir);
    }
    if (sb->lock_fd >= 0)
        close(sb->lock_fd);
    for (size_t i = 0; i < sb->n_files; i++) {
        free(sb->files[i].host);
        free(sb->files[i].name);
    }
    free(sb->files);
    for (size_t i = 0; i < sb->n_box_files; i++) {
        free(sb->box_files[i].host);
        free(sb->box_files[i].name);
    }
    free(sb->box_files);
    free(sb->top_dir);
    free(sb->run_dir);
    free(sb->sock_dir);
    buf_release(&sb->warnings);
    free(sb->net_rules);
    pthread_mutex_destroy(&sb->egress_mu);
    sb_policy_release(&sb->policy);
    free(sb);
}
