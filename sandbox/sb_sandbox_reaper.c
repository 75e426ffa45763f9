/* sb_sandbox_reaper: sb_sandbox_hand_off(), a box's teardown left to a
 * detached process (sb_sandbox.h). */
#include "sandbox/sb_sandbox.h"

#include "sandbox/sb_cgroup.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

/* The reaper, a grandchild of the launcher (so nobody's zombie) in a
 * session of its own, with nothing of the caller's open but the box's
 * pidfd and the run dir's lock: waits until the killed box has died
 * (killing again every 100 ms, for at most ~10 s), then removes its
 * cgroup and run dir. Holding the flock until then keeps the stale-run-dir
 * collector (s_gc_run_dirs) away; if the reaper itself is killed, that
 * collector and the cgroup collector (named after our pid) clean up. */
static _Noreturn void
s_reaper(sb_sandbox_t *sb)
{
    setsid();
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; null >= 0 && fd < 3; fd++)
        dup2(null, fd);
    int keep[2] = {sb->pidfd, sb->lock_fd};
    sb_box_close_others(keep, 2);
    prctl(PR_SET_NAME, "ja-reaper", 0, 0, 0);
    struct pollfd pf = {.fd = sb->pidfd, .events = POLLIN};
    for (int round = 0; round < 100; round++) {
        int pr = poll(&pf, 1, 100);
        if (pr > 0 || (pr < 0 && errno != EINTR))
            break;
        syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
        sb_cgroup_kill(sb->cg);
    }
    sb_cgroup_destroy(&sb->cg);
    sb_files_remove_tree(sb->top_dir);
    _exit(0);
}

void
sb_sandbox_hand_off(sb_sandbox_t **pp)
{
    if (!pp || !*pp)
        return;
    sb_sandbox_t *sb = *pp;
    if (sb->state != ST_RUNNING || sb->policy.keep_workspace_dir) {
        sb_sandbox_destroy(pp);
        return;
    }
    /* pid 1's death takes the whole pid namespace with it; the reaper
     * also kills what the cgroup lists. */
    syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    sb->killed = true;
    sb_box_egress_stop(sb);
    /* The reaper must outlive a Ctrl-C to our process group. */
    sigset_t mask;
    sb_detach_block(&mask);
    pid_t mid = fork();
    if (mid == 0) {
        sb_detach_child(&mask);
        pid_t reaper = fork();
        if (reaper == 0)
            s_reaper(sb);
        _exit(reaper < 0 ? 1 : 0);
    }
    sb_detach_restore(&mask);
    int status = 1;
    while (mid > 0 && waitpid(mid, &status, 0) < 0 && errno == EINTR)
        ;
    /* Without a reaper, clean up here: slower, never leaky. */
    sb->handed_off = mid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    sb_sandbox_destroy(pp);
}
