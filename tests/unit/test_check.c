/* Unit tests for common/check.h: NEVER/ALWAYS are their condition in a
 * release build, and abort in a sanitizer build (JA_NEVER_ABORTS). */
#include "../tap.h"

#include "common/check.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run `f` in a child: its exit status, or 128 + the signal that ended it. */
static int
s_in_child(int (*f)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull_ok = freopen("/dev/null", "w", stderr) != NULL;
        (void)devnull_ok;
        _exit(f());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

static int
s_never_true(void)
{
    return NEVER(1 + 1 == 2) ? 7 : 0;
}

static int
s_always_false(void)
{
    return ALWAYS(1 + 1 == 3) ? 0 : 7;
}

int
main(void)
{
    int calls = 0;
    ok(!NEVER(++calls == 0), "NEVER of a false condition is false");
    ok(ALWAYS(++calls == 2), "ALWAYS of a true condition is true");
    is_int(calls, 2, "each evaluates its condition exactly once");
#ifdef JA_NEVER_ABORTS
    is_int(s_in_child(s_never_true), 128 + SIGABRT,
           "in a sanitizer build a NEVER that holds aborts");
    is_int(s_in_child(s_always_false), 128 + SIGABRT,
           "in a sanitizer build an ALWAYS that fails aborts");
#else
    is_int(s_in_child(s_never_true), 7,
           "in a release build a NEVER that holds is handled (true)");
    is_int(s_in_child(s_always_false), 7,
           "in a release build an ALWAYS that fails is handled (false)");
#endif
    done_testing();
}
