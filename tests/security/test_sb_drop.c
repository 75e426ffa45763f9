/*
 * One privilege drop (sandbox/sb_drop.h): the sandbox's program and every
 * kernel the factory forks run the same C code (the factory loads it as a
 * shared object with ctypes), and it fails closed: a drop that cannot be
 * completed is reported, never skipped.
 */
#include "../tap.h"

#include "sandbox/sb_drop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Python, loading the library from fd `lib` exactly as kb_zygote.py does,
 * then running "user code" only if the drop succeeded. */
static const char s_py[] =
    "import ctypes, os, sys\n"
    "drop = ctypes.CDLL('/proc/self/fd/%d' % int(sys.argv[1]), "
    "use_errno=True)\n"
    "drop.sb_drop_to_user.argtypes = [ctypes.c_uint, "
    "ctypes.POINTER(ctypes.c_char_p)]\n"
    "step = ctypes.c_char_p()\n"
    "if drop.sb_drop_to_user(1000, ctypes.byref(step)) != 0:\n"
    "    print('refused:', step.value.decode(), ctypes.get_errno(), "
    "flush=True)\n"
    "    os._exit(1)\n"
    "st = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
    "print('USER CODE', os.getuid(), os.getgid(), os.getgroups(),\n"
    "      st['CapEff'].strip(), st['CapBnd'].strip(),\n"
    "      st['NoNewPrivs'].strip())\n";

/* In a child about to exec: keep only CAP_SETUID and CAP_SETGID across
 * exec (ambient, with root's automatic capabilities switched off): allowed
 * to change ids, not to shrink the bounding set. */
static int
s_only_setid_caps(void)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &hdr, data) < 0)
        return -1;
    data[0].inheritable |= (1u << CAP_SETUID) | (1u << CAP_SETGID);
    if (syscall(SYS_capset, &hdr, data) < 0 ||
        prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0,
              0) < 0 ||
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETUID, 0, 0) < 0 ||
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETGID, 0, 0) < 0)
        return -1;
    return 0;
}

/* Run s_py in a child (with only the set-id capabilities when `weak`),
 * output into buf. */
static int
s_run_py(int lib, bool weak, char *buf, size_t size)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        if (weak && s_only_setid_caps() < 0)
            _exit(99);
        fcntl(lib, F_SETFD, 0);
        char arg[16];
        snprintf(arg, sizeof arg, "%d", lib);
        char py[] = "/usr/bin/python3", c[] = "-c";
        char *argv[] = {py, c, (char *)s_py, arg, NULL};
        char *envp[] = {NULL};
        execve(py, argv, envp);
        _exit(98);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < size && (r = read(pfd[0], buf + n, size - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int
main(void)
{
    if (geteuid() != 0) {
        skip("needs root (drops to uid 1000 and 65534)");
        return done_testing();
    }
    err_t err = {0};
    int lib = sb_drop_lib_memfd(&err);
    ok(lib >= 0, "the drop is built in as a shared object (%s)",
       lib < 0 ? err.text : "memfd");
    char out[2048];
    int rc = s_run_py(lib, false, out, sizeof out);
    ok(rc == 0 && strstr(out, "USER CODE 1000 1000 [] 0000000000000000 "
                              "0000000000000000 1"),
       "through the factory's library (ctypes), the drop leaves uid/gid "
       "1000, no groups, no capability, an empty bounding set and "
       "no_new_privs");
    if (rc != 0 || !strstr(out, "USER CODE"))
        diag("rc %d: %s", rc, out);

    /* Allowed to change ids but not to drop the bounding set (no
     * CAP_SETPCAP): the old Python copy ignored that failure, became uid
     * 1000 and ran user code with a full bounding set. */
    rc = s_run_py(lib, true, out, sizeof out);
    ok(rc == 1 && strstr(out, "refused: drop the capability bounding set 1") &&
           !strstr(out, "USER CODE"),
       "a kernel that may change ids but cannot empty its bounding set is "
       "refused: no user code runs");
    if (rc != 1 || !strstr(out, "refused"))
        diag("rc %d: %s", rc, out);

    pid_t pid = fork();
    if (pid == 0) {
        if (syscall(SYS_setresuid, 65534, 65534, 65534) < 0)
            _exit(99);
        const char *step = NULL;
        int r = sb_drop_to_user(1000, &step);
        _exit(r == -1 && errno == EPERM && step &&
                      strcmp(step, "drop the capability bounding set") == 0 &&
                      getuid() == 65534
                  ? 0
                  : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
       "in C, the same drop reports the step that failed (EPERM) and "
       "changes nothing more");
    close(lib);
    return done_testing();
}
