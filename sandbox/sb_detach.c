/* sb_detach: keeping a box out of the caller's terminal signals (see
 * sb_detach_block() in sb_sandbox.h). */
#include "sandbox/sb_sandbox.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What sb_detach_block() blocks. */
static void
s_detach_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGQUIT);
    sigaddset(set, SIGTSTP);
    sigaddset(set, SIGHUP);
}

void
sb_detach_block(sigset_t *old)
{
    sigset_t set;
    s_detach_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void
sb_detach_restore(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

void
sb_detach_child(const sigset_t *old)
{
    syscall(SYS_setsid);
    /* Ignoring a pending signal discards it (POSIX); the child's handlers
     * are copies of the caller's, so reset them to the default. */
    struct sigaction ign, dfl;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    static const int sigs[] = {SIGINT, SIGQUIT, SIGTSTP, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        sigaction(sigs[i], &ign, NULL);
        sigaction(sigs[i], &dfl, NULL);
    }
    sigprocmask(SIG_SETMASK, old, NULL);
}
