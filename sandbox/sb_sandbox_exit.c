/*
 * sb_sandbox_exit: a box's end as its launcher sees it: signals to pid 1
 * (or to runsc under gVisor), waiting on the pidfd, and what the exit
 * means: the program's status as pid 1 reported it, or the box killed
 * (pid 1 gone without a report, the Sentry dead), with the cgroup's OOM
 * and pids counts deciding whether a limit did it. Also the pids a
 * caller may need while the box runs.
 */
#include "sandbox/sb_sandbox.h"

#include "sandbox/sb_cgroup.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

int
sb_box_reap(sb_sandbox_t *sb, bool block)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int flags = WEXITED | (block ? 0 : WNOHANG);
    if (waitid((idtype_t)P_PIDFD, (id_t)sb->pidfd, &si, flags) < 0)
        return -1;
    if (si.si_pid == 0)
        return 0;
    sb->state = ST_REAPED;
    sb_box_egress_stop(sb); /* the box's way out goes with it */
    memset(&sb->exit, 0, sizeof sb->exit);
    struct s_msg m;
    int got_status = 0;
    for (;;) {
        struct pollfd pf = {.fd = sb->ctl, .events = POLLIN};
        if (sb->ctl < 0 || poll(&pf, 1, 0) <= 0 || !(pf.revents & POLLIN))
            break;
        int t = sb_box_recv(sb->ctl, &m, NULL);
        if (t <= 0)
            break;
        if (t == MSG_STATUS)
            got_status = 1;
    }
    if (sb->gv) {
        m.status = sb_gv_status(sb);
        got_status = m.status >= 0;
    }
    if (got_status) {
        if (WIFEXITED(m.status)) {
            sb->exit.kind = SB_EXITED;
            sb->exit.code = WEXITSTATUS(m.status);
        } else {
            sb->exit.kind = SB_SIGNALED;
            sb->exit.signal = WTERMSIG(m.status);
        }
    } else if (si.si_code == CLD_EXITED && sb->gv) {
        /* runsc ended without the relay's report: the Sentry itself died
         * (a limit of the host cgroup hit it): the whole box was killed */
        sb->exit.kind = SB_SIGNALED;
        sb->exit.signal = SIGKILL;
        sb->exit.box_killed = true;
    } else if (si.si_code == CLD_EXITED) {
        sb->exit.kind = SB_EXITED; /* init exited without a report */
        sb->exit.code = si.si_status;
        sb->exit.box_killed = true;
    } else {
        sb->exit.kind = SB_SIGNALED;
        sb->exit.signal = si.si_status;
        sb->exit.box_killed = true;
    }
    if (sb->exit.kind == SB_SIGNALED && sb->exit.signal == SIGKILL &&
        sb_cgroup_oom_kills(sb->cg) > sb->oom_base)
        sb->exit.kind = SB_OOM_KILLED;
    /* Under gVisor the host's OOM killer may take the Sentry or a ptrace
     * stub rather than the program: runsc then exits 137, or the relay
     * reports whatever the Sentry saw. The cgroup's count decides. */
    if (sb->gv && sb_cgroup_oom_kills(sb->cg) > sb->oom_base) {
        sb->exit.kind = SB_OOM_KILLED;
        sb->exit.signal = SIGKILL;
    }
    /* Under gVisor the host pids cgroup counts the Sentry's threads and
     * ptrace stubs (--pids + 192): when it refused one, the Sentry died
     * and took the whole box. */
    if (sb->gv && sb->exit.box_killed && sb->exit.kind == SB_SIGNALED &&
        sb->exit.signal == SIGKILL && sb_cgroup_pids_max_hits(sb->cg) > 0)
        sb->exit.pids_limit = true;
    return 1;
}

/* The start of a small /proc file as a string in text[size]: 0, or -1
 * when it does not open. */
static int
s_read_proc(const char *path, char *text, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, size - 1);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    return 0;
}

pid_t
sb_sandbox_program_pid(const sb_sandbox_t *sb)
{
    if (sb->state != ST_RUNNING || sb->pid <= 0 || sb->gv)
        return -1;
    char path[64], text[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)sb->pid,
             (int)sb->pid);
    if (s_read_proc(path, text, sizeof text) < 0)
        return -1;
    long pid = strtol(text, NULL, 10);
    return pid > 0 ? (pid_t)pid : -1;
}

pid_t
sb_pidfd_pid(int pidfd)
{
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    if (s_read_proc(path, text, sizeof text) < 0)
        return -1;
    const char *p = strstr(text, "\nPid:");
    return p ? (pid_t)strtol(p + 6, NULL, 10) : -1;
}

int
sb_sandbox_signal(sb_sandbox_t *sb, int sig)
{
    if (sb->state != ST_RUNNING) {
        errno = ESRCH;
        return -1;
    }
    if (sb->gv)
        return sb_gv_signal(sb, sig);
    return (int)syscall(SYS_pidfd_send_signal, sb->pidfd, sig, NULL, 0);
}

int
sb_sandbox_kill(sb_sandbox_t *sb)
{
    if (sb->state != ST_RUNNING)
        return 0;
    sb->killed = true;
    int rc = (int)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    sb_cgroup_kill(sb->cg);
    return rc < 0 && errno != ESRCH ? -1 : 0;
}

int
sb_sandbox_wait(sb_sandbox_t *sb, int timeout_ms, sb_exit_t *out)
{
    if (sb->state == ST_NEW) {
        errno = ECHILD;
        return -1;
    }
    if (sb->state == ST_RUNNING) {
        struct pollfd pf = {.fd = sb->pidfd, .events = POLLIN};
        int pr;
        while ((pr = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
            ;
        if (pr < 0)
            return -1;
        if (pr == 0)
            return 1;
        if (sb_box_reap(sb, true) < 0)
            return -1;
    }
    if (out)
        *out = sb->exit;
    return 0;
}

int
sb_sandbox_finish(sb_sandbox_t *sb, err_t *err)
{
    if (sb->finished)
        return 0;
    sb->finished = true;
    if (sb->state == ST_RUNNING) {
        sb_sandbox_kill(sb);
        sb_sandbox_wait(sb, -1, NULL);
    }
    if (sb->policy.keep_workspace_dir && sb->ws_fd >= 0) {
        sb_files_out_opts_t o;
        sb_policy_out_opts(&sb->policy, &o);
        return sb_files_copy_out(sb->ws_fd, ".", sb->policy.keep_workspace_dir,
                                 &o, NULL, err) < 0
                   ? err_prefix(err, "keeping the workspace in '%s'",
                                sb->policy.keep_workspace_dir)
                   : 0;
    }
    return 0;
}
