/*
 * sb_seccomp: the deny table and its compilation with libseccomp.
 *
 * Reading guide: s_rules is the whole policy. Every row is one denial with
 * its reason; the compiler below only translates the `cond` column into
 * libseccomp comparisons. Argument checks on 32-bit kernel arguments
 * (ioctl request, socket family) compare in a way that high garbage bits
 * cannot sneak past (masked compare, or "greater than" catching them).
 */
#include "sandbox/sb_seccomp.h"

#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SOCK_PACKET
#define SOCK_PACKET 10
#endif
#ifndef AF_NETLINK
#define AF_NETLINK 16
#endif

enum s_cond {
    C_ALWAYS,            /* every call */
    C_A0_HAS_BIT,        /* when (arg0 & value) == value */
    C_A0_NOT,            /* when arg0 != value */
    C_A1_IS32,           /* when (arg1 & 0xffffffff) == value */
    C_A1_IS32_A2_SET,    /* when (arg1 & 0xffffffff) == value, arg2 != 0 */
    C_FAMILY_NOT_OK,     /* socket(): families but UNIX/INET/INET6/NETLINK */
    C_NETLINK_NOT_ROUTE, /* socket(AF_NETLINK, *, proto != NETLINK_ROUTE) */
    C_INET_SOCKTYPE_IS   /* socket(AF_INET[6], (arg1 & 0xf) == value) */
};

struct s_rule {
    const char *name;   /* system call */
    bool allow;         /* an allow-list row (cond is C_ALWAYS, errnum 0) */
    enum s_cond cond;   /* deny rows: when to deny */
    uint64_t value;     /* the condition's constant */
    int errnum;         /* deny rows: errno returned */
    const char *when;   /* the condition in words ("" = always) */
    const char *reason; /* why it is allowed, or why it is denied */
};

#define ALLOW(n, why)                                                          \
    {                                                                          \
        n, true, C_ALWAYS, 0, 0, "", why                                       \
    }
#define ALWAYS(n, why)                                                         \
    {                                                                          \
        n, false, C_ALWAYS, 0, EPERM, "", why                                  \
    }
#define CLONE_NS(bit, words)                                                   \
    {                                                                          \
        "clone", false, C_A0_HAS_BIT, bit, EPERM, "flags include " words,      \
            "new namespaces would escape the sandbox's view"                   \
    }

/* The policy, one row per decision. The allow rows come from tracing
 * CPython, ipykernel, libzmq, numpy/OpenBLAS, pandas, matplotlib, pip
 * and R's IRkernel over the test suites and the example notebooks (strace
 * -f and --seccomp-audit); anything else is refused. The deny rows say
 * why the dangerous calls are out; the conditional ones narrow calls the
 * allow list has. Keep it sorted by theme. */
static const struct s_rule s_rules[] = {
    /* ---- Allowed: files and descriptors. ---- */
    ALLOW("read", "file and socket I/O"),
    ALLOW("write", "file and socket I/O"),
    ALLOW("readv", "file and socket I/O"),
    ALLOW("writev", "file and socket I/O"),
    ALLOW("pread64", "positioned reads (sqlite, zipimport, numpy.load)"),
    ALLOW("pwrite64", "positioned writes (sqlite)"),
    ALLOW("preadv", "positioned vector reads"),
    ALLOW("pwritev", "positioned vector writes"),
    ALLOW("preadv2", "positioned vector reads (os.preadv)"),
    ALLOW("pwritev2", "positioned vector writes (os.pwritev)"),
    ALLOW("open", "opening files (old callers)"),
    ALLOW("openat", "opening files"),
    ALLOW("openat2", "opening files with RESOLVE_* limits"),
    ALLOW("close", "closing descriptors"),
    ALLOW("close_range", "subprocess closes inherited descriptors"),
    ALLOW("lseek", "file positions"),
    ALLOW("stat", "file metadata"),
    ALLOW("fstat", "file metadata"),
    ALLOW("lstat", "file metadata"),
    ALLOW("newfstatat", "file metadata (glibc's stat)"),
    ALLOW("statx", "file metadata (newer glibc, R)"),
    ALLOW("statfs", "file system metadata (shutil, R)"),
    ALLOW("fstatfs", "file system metadata (glibc, multiprocessing)"),
    ALLOW("access", "permission checks (shutil.which, R)"),
    ALLOW("faccessat", "permission checks"),
    ALLOW("faccessat2", "permission checks (R, os.access with flags)"),
    ALLOW("readlink", "symlinks (sys.executable, /proc/self/exe)"),
    ALLOW("readlinkat", "symlinks"),
    ALLOW("getdents", "listing directories (old callers)"),
    ALLOW("getdents64", "listing directories"),
    ALLOW("getcwd", "the working directory"),
    ALLOW("chdir", "the working directory"),
    ALLOW("fchdir", "the working directory"),
    ALLOW("mkdir", "creating directories"),
    ALLOW("mkdirat", "creating directories"),
    ALLOW("rmdir", "removing directories"),
    ALLOW("unlink", "removing files"),
    ALLOW("unlinkat", "removing files"),
    ALLOW("rename", "renaming files (pip, matplotlib's cache)"),
    ALLOW("renameat", "renaming files"),
    ALLOW("renameat2", "renaming files (RENAME_NOREPLACE)"),
    ALLOW("link", "hard links (atomic file writes)"),
    ALLOW("linkat", "hard links"),
    ALLOW("symlink", "symbolic links (pip, venv)"),
    ALLOW("symlinkat", "symbolic links"),
    ALLOW("chmod", "file modes (pip sets executable bits)"),
    ALLOW("fchmod", "file modes (shutil.copy, pip)"),
    ALLOW("fchmodat", "file modes"),
    ALLOW("chown", "ownership within the box's own uid (shutil)"),
    ALLOW("fchown", "ownership within the box's own uid (shutil, sqlite)"),
    ALLOW("lchown", "ownership within the box's own uid"),
    ALLOW("fchownat", "ownership within the box's own uid"),
    ALLOW("umask", "the file creation mask"),
    ALLOW("truncate", "resizing files"),
    ALLOW("ftruncate", "resizing files (sqlite, shared memory)"),
    ALLOW("fallocate", "reserving file space"),
    ALLOW("fsync", "flushing files (sqlite, IPython history)"),
    ALLOW("fdatasync", "flushing files (sqlite)"),
    ALLOW("utimes", "file times"),
    ALLOW("utimensat", "file times (shutil.copystat, pip)"),
    ALLOW("flock", "advisory locks (pip, sqlite)"),
    ALLOW("fcntl", "descriptor flags and record locks"),
    ALLOW("dup", "duplicating descriptors"),
    ALLOW("dup2", "duplicating descriptors"),
    ALLOW("dup3", "duplicating descriptors"),
    ALLOW("pipe", "pipes"),
    ALLOW("pipe2", "pipes (subprocess)"),
    ALLOW("sendfile", "copying files (shutil.copyfile)"),
    ALLOW("fadvise64", "read-ahead hints (Python's file reads)"),
    ALLOW("getxattr", "extended attributes: reading only"),
    ALLOW("lgetxattr", "extended attributes: reading only (shutil.copystat)"),
    ALLOW("fgetxattr", "extended attributes: reading only"),
    ALLOW("listxattr", "extended attributes: reading only"),
    ALLOW("llistxattr", "extended attributes: reading only (shutil)"),
    ALLOW("flistxattr", "extended attributes: reading only"),
    ALLOW("mknod", "FIFOs (os.mkfifo); device nodes need CAP_MKNOD, which "
                   "the box lacks"),
    ALLOW("mknodat", "FIFOs (os.mkfifo); device nodes need CAP_MKNOD"),
    ALLOW("memfd_create", "anonymous files (libffi, ctypes callbacks)"),
    ALLOW("ioctl", "terminal and socket queries (FIONREAD, TCGETS); "
                   "dangerous requests are denied below"),
    /* ---- Allowed: memory. ---- */
    ALLOW("brk", "the heap"),
    ALLOW("mmap", "memory and file mappings"),
    ALLOW("munmap", "memory mappings"),
    ALLOW("mremap", "growing mappings (realloc of big arrays)"),
    ALLOW("mprotect", "loading libraries, JIT trampolines (libffi)"),
    ALLOW("madvise", "returning memory (glibc malloc, OpenBLAS)"),
    ALLOW("msync", "flushing file mappings (numpy.memmap)"),
    ALLOW("mincore", "page residency (glibc, R)"),
    ALLOW("get_mempolicy", "NUMA queries (OpenBLAS, numpy)"),
    /* ---- Allowed: processes, threads and signals. ---- */
    ALLOW("clone", "threads and fork; namespace flags are denied below"),
    ALLOW("fork", "subprocess, multiprocessing"),
    ALLOW("vfork", "subprocess (posix_spawn)"),
    ALLOW("execve", "running programs (pip, subprocess, R's system())"),
    ALLOW("exit", "thread exit"),
    ALLOW("exit_group", "process exit"),
    ALLOW("wait4", "reaping children"),
    ALLOW("waitid", "reaping children"),
    ALLOW("kill", "signals within the box's pid namespace"),
    ALLOW("tkill", "signals to threads"),
    ALLOW("tgkill", "signals to threads (raise, R)"),
    ALLOW("rt_sigaction", "signal handlers"),
    ALLOW("rt_sigprocmask", "signal masks"),
    ALLOW("rt_sigreturn", "returning from signal handlers"),
    ALLOW("rt_sigsuspend", "waiting for signals"),
    ALLOW("rt_sigpending", "pending signals"),
    ALLOW("rt_sigtimedwait", "waiting for signals (signal.sigtimedwait)"),
    ALLOW("sigaltstack", "signal stacks (faulthandler, R)"),
    ALLOW("pause", "waiting for signals"),
    ALLOW("restart_syscall", "restarting interrupted calls (kernel)"),
    ALLOW("getpid", "process ids"),
    ALLOW("getppid", "process ids (ipykernel's parent poller)"),
    ALLOW("gettid", "thread ids"),
    ALLOW("getuid", "identity queries"),
    ALLOW("geteuid", "identity queries"),
    ALLOW("getgid", "identity queries"),
    ALLOW("getegid", "identity queries"),
    ALLOW("getresuid", "identity queries"),
    ALLOW("getresgid", "identity queries"),
    ALLOW("getgroups", "identity queries"),
    ALLOW("setsid", "new sessions (subprocess start_new_session)"),
    ALLOW("setpgid", "process groups (subprocess, shells)"),
    ALLOW("getpgid", "process groups"),
    ALLOW("getpgrp", "process groups (shells)"),
    ALLOW("getsid", "sessions"),
    ALLOW("set_tid_address", "thread start-up (glibc)"),
    ALLOW("set_robust_list", "thread start-up (glibc)"),
    ALLOW("futex", "locks and condition variables"),
    ALLOW("rseq", "restartable sequences (glibc registers one per thread)"),
    ALLOW("arch_prctl", "thread-local storage (x86-64)"),
    ALLOW("prctl", "thread names, PDEATHSIG, NO_NEW_PRIVS, dumpable"),
    ALLOW("capget", "capability queries (there are none to use)"),
    ALLOW("capset", "dropping capabilities (the factory's kernels drop "
                    "through sb_drop); raising needs them"),
    ALLOW("setresuid", "dropping to uid 1000 (sb_drop in the factory's "
                       "kernels); without capabilities it cannot gain"),
    ALLOW("setresgid", "dropping to gid 1000 (sb_drop)"),
    ALLOW("setgroups", "dropping supplementary groups (sb_drop)"),
    ALLOW("setuid", "identity changes within the box's own ids"),
    ALLOW("setgid", "identity changes within the box's own ids"),
    ALLOW("sched_yield", "yielding the CPU (OpenBLAS, libzmq)"),
    ALLOW("sched_getaffinity", "CPU counts (os.cpu_count, OpenBLAS)"),
    ALLOW("sched_setaffinity", "thread pinning (OpenBLAS)"),
    ALLOW("sched_getparam", "scheduling queries (glibc posix_spawn)"),
    ALLOW("sched_getscheduler", "scheduling queries (glibc posix_spawn)"),
    ALLOW("sched_setscheduler", "scheduling in children (posix_spawn)"),
    ALLOW("sched_get_priority_max", "scheduling queries"),
    ALLOW("sched_get_priority_min", "scheduling queries"),
    ALLOW("getpriority", "nice values"),
    ALLOW("setpriority", "lowering priority (os.nice)"),
    ALLOW("getrlimit", "resource limits (queries, lowering)"),
    ALLOW("setrlimit", "resource limits (lowering; raising needs a "
                       "capability)"),
    ALLOW("prlimit64", "resource limits (resource module)"),
    ALLOW("getrusage", "resource usage (R's proc.time, resource module)"),
    ALLOW("times", "process times (os.times)"),
    ALLOW("sysinfo", "memory totals (R, psutil)"),
    ALLOW("uname", "system name (platform, pip)"),
    ALLOW("getcpu", "the current CPU (glibc's sched_getcpu)"),
    ALLOW("pidfd_open", "waiting for children (asyncio, subprocess)"),
    ALLOW("pidfd_send_signal", "signalling children by pidfd"),
    ALLOW("personality", "querying the persona; changes are denied below"),
    /* ---- Allowed: time and waiting. ---- */
    ALLOW("clock_gettime", "clocks"),
    ALLOW("clock_getres", "clocks"),
    ALLOW("clock_nanosleep", "sleeping (time.sleep)"),
    ALLOW("gettimeofday", "clocks"),
    ALLOW("time", "clocks"),
    ALLOW("nanosleep", "sleeping"),
    ALLOW("alarm", "timers (signal.alarm)"),
    ALLOW("getitimer", "interval timers"),
    ALLOW("setitimer", "interval timers (signal.setitimer, R)"),
    ALLOW("timer_create", "POSIX timers"),
    ALLOW("timer_settime", "POSIX timers"),
    ALLOW("timer_gettime", "POSIX timers"),
    ALLOW("timer_getoverrun", "POSIX timers"),
    ALLOW("timer_delete", "POSIX timers"),
    ALLOW("timerfd_create", "timer descriptors (event loops)"),
    ALLOW("timerfd_settime", "timer descriptors"),
    ALLOW("timerfd_gettime", "timer descriptors"),
    ALLOW("poll", "waiting for descriptors (libzmq, Python)"),
    ALLOW("ppoll", "waiting for descriptors"),
    ALLOW("select", "waiting for descriptors (select module)"),
    ALLOW("pselect6", "waiting for descriptors"),
    ALLOW("epoll_create", "event loops"),
    ALLOW("epoll_create1", "event loops (libzmq, asyncio, tornado)"),
    ALLOW("epoll_ctl", "event loops"),
    ALLOW("epoll_wait", "event loops"),
    ALLOW("epoll_pwait", "event loops"),
    ALLOW("epoll_pwait2", "event loops"),
    ALLOW("eventfd", "wake-ups"),
    ALLOW("eventfd2", "wake-ups (libzmq's signaler)"),
    ALLOW("signalfd", "signals as descriptors"),
    ALLOW("signalfd4", "signals as descriptors"),
    ALLOW("getrandom", "random numbers (os.urandom, hash seeds)"),
    ALLOW("landlock_create_ruleset", "restricting oneself further (the "
                                     "factory's kernels apply their box's "
                                     "Landlock rules)"),
    ALLOW("landlock_add_rule", "restricting oneself further"),
    ALLOW("landlock_restrict_self", "restricting oneself further"),
    /* ---- Allowed: sockets (families are limited below). ---- */
    ALLOW("socket", "sockets; families and types are limited below"),
    ALLOW("socketpair", "local socket pairs; AF_UNIX only, below"),
    ALLOW("bind", "ipc:// and loopback sockets (libzmq)"),
    ALLOW("listen", "ipc:// and loopback sockets (libzmq)"),
    ALLOW("accept", "accepting connections"),
    ALLOW("accept4", "accepting connections (libzmq)"),
    ALLOW("connect", "connecting to the run dir's sockets"),
    ALLOW("getsockname", "socket addresses"),
    ALLOW("getpeername", "socket addresses (libzmq)"),
    ALLOW("sendto", "sending"),
    ALLOW("recvfrom", "receiving"),
    ALLOW("sendmsg", "sending (libzmq, descriptor passing)"),
    ALLOW("recvmsg", "receiving"),
    ALLOW("sendmmsg", "sending batches (glibc's resolver)"),
    ALLOW("recvmmsg", "receiving batches"),
    ALLOW("shutdown", "closing connections"),
    ALLOW("setsockopt", "socket options"),
    ALLOW("getsockopt", "socket options"),

    /* ---- Denied, though harmless-looking: nothing here needs them. ---- */
    ALWAYS("splice", "Dirty Pipe (CVE-2022-0847) went through splice; "
                     "nothing traced uses it"),
    ALWAYS("vmsplice", "page-cache and pipe-buffer bugs; nothing traced "
                       "uses it"),
    ALWAYS("tee", "pipe-buffer surface; nothing traced uses it"),
    ALWAYS("shmget", "System V IPC: nothing traced uses it (POSIX shared "
                     "memory in /dev/shm serves multiprocessing)"),
    ALWAYS("semget", "System V IPC: nothing traced uses it"),
    ALWAYS("msgget", "System V IPC: nothing traced uses it"),
    /* ---- Denied: looking into or controlling other processes. ---- */
    ALWAYS("ptrace", "debugging other processes can read or change them"),
    ALWAYS("process_vm_readv", "reads another process's memory"),
    ALWAYS("process_vm_writev", "writes another process's memory"),
    ALWAYS("kcmp", "compares kernel objects of other processes"),
    ALWAYS("pidfd_getfd", "steals file descriptors from other processes"),
    /* The filesystem view. */
    ALWAYS("mount", "changes the filesystem view"),
    ALWAYS("umount2", "could uncover what the sandbox hides"),
    ALWAYS("mount_setattr", "could make read-only mounts writable"),
    ALWAYS("move_mount", "changes the filesystem view"),
    ALWAYS("open_tree", "clones mounts"),
    ALWAYS("fsopen", "new mount API"),
    ALWAYS("fsconfig", "new mount API"),
    ALWAYS("fsmount", "new mount API"),
    ALWAYS("fspick", "new mount API"),
    ALWAYS("chroot", "changes the filesystem root"),
    ALWAYS("pivot_root", "changes the filesystem root"),
    ALWAYS("open_by_handle_at", "opens files by handle, bypassing paths"),
    ALWAYS("name_to_handle_at", "pairs with open_by_handle_at"),
    ALWAYS("quotactl", "filesystem quota administration"),
    ALWAYS("quotactl_fd", "filesystem quota administration"),
    /* Namespaces. */
    ALWAYS("setns", "joins other namespaces"),
    ALWAYS("unshare", "new namespaces would escape the sandbox's view"),
    CLONE_NS(CLONE_NEWNS, "CLONE_NEWNS"),
    CLONE_NS(CLONE_NEWUTS, "CLONE_NEWUTS"),
    CLONE_NS(CLONE_NEWIPC, "CLONE_NEWIPC"),
    CLONE_NS(CLONE_NEWUSER, "CLONE_NEWUSER"),
    CLONE_NS(CLONE_NEWPID, "CLONE_NEWPID"),
    CLONE_NS(CLONE_NEWNET, "CLONE_NEWNET"),
    CLONE_NS(CLONE_NEWCGROUP, "CLONE_NEWCGROUP"),
    {"clone3", false, C_ALWAYS, 0, ENOSYS, "",
     "its flags live in memory a filter cannot read; ENOSYS makes glibc "
     "fall back to clone"},
    /* Kernel attack surface rarely needed by Python. */
    ALWAYS("keyctl", "kernel keyrings are not namespaced"),
    ALWAYS("add_key", "kernel keyrings are not namespaced"),
    ALWAYS("request_key", "kernel keyrings are not namespaced"),
    ALWAYS("bpf", "eBPF programs: large kernel attack surface"),
    ALWAYS("perf_event_open", "performance counters leak and attack"),
    ALWAYS("userfaultfd", "widely used to win kernel races"),
    ALWAYS("io_uring_setup", "io_uring: large kernel attack surface"),
    ALWAYS("io_uring_enter", "io_uring: large kernel attack surface"),
    ALWAYS("io_uring_register", "io_uring: large kernel attack surface"),
    ALWAYS("fanotify_init", "watches filesystem activity"),
    /* inotify on the host inodes bound in (/usr, --bind) would show live
     * which programs and files the host and other sessions open. Nothing
     * a kernel needs watches files: IPython's autoreload and matplotlib
     * poll; watchdog falls back to polling where asked. */
    ALWAYS("inotify_init", "watches files, host inodes bound in included: "
                           "shows what the host runs"),
    ALWAYS("inotify_init1", "watches files, host inodes bound in included: "
                            "shows what the host runs"),
    ALWAYS("inotify_add_watch", "inotify (see inotify_init)"),
    ALWAYS("inotify_rm_watch", "inotify (see inotify_init)"),
    ALWAYS("lookup_dcookie", "kernel profiling interface"),
    ALWAYS("syslog", "reads the kernel log"),
    ALWAYS("uselib", "obsolete loader interface"),
    ALWAYS("vhangup", "hangs up terminals"),
    ALWAYS("memfd_secret", "secret memory: pins pages, little use here"),
    ALWAYS("process_madvise", "advises on other processes' memory"),
    ALWAYS("process_mrelease", "reaps other processes' memory"),
    ALWAYS("set_mempolicy_home_node", "NUMA administration"),
    ALWAYS("futex_waitv", "new futex surface no runtime here needs yet"),
    ALWAYS("seccomp", "filters are set by the launcher (prctl stays "
                      "allowed and can only add restrictions)"),
    /* Machine administration. */
    ALWAYS("kexec_load", "replaces the running kernel"),
    ALWAYS("kexec_file_load", "replaces the running kernel"),
    ALWAYS("init_module", "loads kernel modules"),
    ALWAYS("finit_module", "loads kernel modules"),
    ALWAYS("delete_module", "unloads kernel modules"),
    ALWAYS("reboot", "reboots the machine"),
    ALWAYS("swapon", "changes swap"),
    ALWAYS("swapoff", "changes swap"),
    ALWAYS("acct", "process accounting"),
    ALWAYS("settimeofday", "sets the clock"),
    ALWAYS("clock_settime", "sets the clock"),
    ALWAYS("clock_adjtime", "adjusts the clock"),
    ALWAYS("adjtimex", "adjusts the clock"),
    ALWAYS("sethostname", "the host name is fixed"),
    ALWAYS("setdomainname", "the domain name is fixed"),
    ALWAYS("iopl", "raw I/O port access"),
    ALWAYS("ioperm", "raw I/O port access"),
    ALWAYS("modify_ldt", "segment descriptors: old exploit surface"),
    {"personality", false, C_A0_NOT, 0, EPERM, "persona is not 0 (PER_LINUX)",
     "ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC and friends weaken hardening"},
    /* Terminals. */
    {"ioctl", false, C_A1_IS32, TIOCSTI, EPERM, "request is TIOCSTI",
     "pushes keystrokes into the user's terminal"},
    {"ioctl", false, C_A1_IS32, TIOCLINUX, EPERM, "request is TIOCLINUX",
     "console control, can also inject input"},
    {"ioctl", false, C_A1_IS32, TIOCSETD, EPERM, "request is TIOCSETD",
     "sets a terminal's line discipline: N_NULL swallows all its I/O, "
     "n_hdlc and n_gsm are known kernel attack surface"},
    {"ioctl", false, C_A1_IS32, TIOCCONS, EPERM, "request is TIOCCONS",
     "redirects console output to a terminal"},
    {"ioctl", false, C_A1_IS32_A2_SET, TIOCSCTTY, EPERM,
     "request is TIOCSCTTY with a non-zero argument",
     "steals another session's controlling terminal (with argument 0 it "
     "only takes a terminal no session has: forkpty, pexpect and "
     "IPython's !cmd need that)"},
    /* Sockets: the network namespace has only loopback; keep it that way. */
    {"socket", false, C_FAMILY_NOT_OK, 0, EPERM,
     "family is not AF_UNIX, AF_INET, AF_INET6 or AF_NETLINK",
     "packet, bluetooth, vsock, alg, ... reach hardware or the kernel"},
    {"socket", false, C_NETLINK_NOT_ROUTE, 0, EPERM,
     "AF_NETLINK with protocol other than NETLINK_ROUTE",
     "audit, uevent, netfilter, ... talk to the kernel (libzmq needs ROUTE)"},
    {"socket", false, C_INET_SOCKTYPE_IS, SOCK_RAW, EPERM,
     "AF_INET or AF_INET6 with type SOCK_RAW",
     "raw packets bypass the protocol stack (netlink needs SOCK_RAW: allowed)"},
    {"socket", false, C_INET_SOCKTYPE_IS, SOCK_PACKET, EPERM,
     "AF_INET or AF_INET6 with type SOCK_PACKET", "link-level packets"},
    {"socketpair", false, C_A0_NOT, AF_UNIX, EPERM, "family is not AF_UNIX",
     "only local pairs are needed"},
};

size_t
sb_seccomp_table(const sb_seccomp_rule_info_t **rows)
{
    enum { N = sizeof s_rules / sizeof s_rules[0] };
    static sb_seccomp_rule_info_t info[N];
    for (size_t i = 0; i < N; i++) {
        info[i].syscall = s_rules[i].name;
        info[i].when = s_rules[i].when;
        info[i].action = s_rules[i].allow              ? "ALLOW"
                         : s_rules[i].errnum == ENOSYS ? "ENOSYS"
                                                       : "EPERM";
        info[i].reason = s_rules[i].reason;
    }
    if (rows)
        *rows = info;
    return N;
}

static json_t *
s_row_json(const char *name, const char *when, const char *action,
           const char *reason)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "syscall", name, "when", when,
                     "action", action, "reason", reason);
}

json_t *
sb_seccomp_table_json(void)
{
    const sb_seccomp_rule_info_t *rows;
    size_t n = sb_seccomp_table(&rows);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, s_row_json(rows[i].syscall, rows[i].when,
                                              rows[i].action, rows[i].reason));
    json_array_append_new(
        arr,
        s_row_json("*",
                   "any other system call this table names or "
                   "that is older than its newest row",
                   "EPERM",
                   "not on the allow list: nothing the box runs needs it"));
    json_array_append_new(
        arr, s_row_json("*",
                        "a system call newer than every row of this "
                        "table (a kernel newer than the table)",
                        "ENOSYS",
                        "glibc falls back to the older call on ENOSYS "
                        "(fchmodat2 -> fchmodat, ...)"));
    json_array_append_new(
        arr, s_row_json("*", "architecture is not the native one (i386, x32)",
                        "KILL_PROCESS",
                        "foreign system call tables bypass this filter"));
    return arr;
}

static int
s_add(scmp_filter_ctx ctx, const struct s_rule *r, int nr)
{
    uint32_t act =
        r->allow ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO((uint32_t)r->errnum);
    switch (r->cond) {
    case C_ALWAYS:
        return seccomp_rule_add(ctx, act, nr, 0);
    case C_A0_HAS_BIT:
        return seccomp_rule_add(
            ctx, act, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, r->value, r->value));
    case C_A0_NOT:
        return seccomp_rule_add(ctx, act, nr, 1,
                                SCMP_A0(SCMP_CMP_NE, r->value));
    case C_A1_IS32:
        return seccomp_rule_add(
            ctx, act, nr, 1,
            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, r->value));
    case C_A1_IS32_A2_SET: /* all 64 bits of arg2: high garbage is denied */
        return seccomp_rule_add(
            ctx, act, nr, 2, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, r->value),
            SCMP_A2(SCMP_CMP_NE, 0));
    case C_FAMILY_NOT_OK: {
        /* libseccomp allows one comparison per argument and rule, so
         * "not in {1,2,10,16}" becomes one rule per other family below 64
         * and one for everything above (which also catches high bits). */
        for (uint64_t fam = 0; fam < 64; fam++) {
            if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6 ||
                fam == AF_NETLINK)
                continue;
            int rc =
                seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_EQ, fam));
            if (rc < 0)
                return rc;
        }
        return seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_GT, 63));
    }
    case C_NETLINK_NOT_ROUTE:
        return seccomp_rule_add(ctx, act, nr, 2,
                                SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                                SCMP_A2(SCMP_CMP_NE, 0 /* NETLINK_ROUTE */));
    case C_INET_SOCKTYPE_IS: {
        int rc =
            seccomp_rule_add(ctx, act, nr, 2, SCMP_A0(SCMP_CMP_EQ, AF_INET),
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, r->value));
        if (rc < 0)
            return rc;
        return seccomp_rule_add(ctx, act, nr, 2, SCMP_A0(SCMP_CMP_EQ, AF_INET6),
                                SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, r->value));
    }
    }
    return -EINVAL;
}

/* One of the two filters, loaded from the table; NULL on failure.
 *
 * F_ALLOW: the allow list. Default EPERM (audit: the user-notification
 * listener); ALLOW rows; unconditional ENOSYS rows (clone3).
 * F_DENY: the deny rows, default ALLOW. They cannot share one filter with
 * the allow rows: libseccomp lets an unconditional ALLOW of clone, socket
 * or ioctl win over the conditional denial of the same call. The kernel
 * runs both and takes the stricter answer.
 * `max_nr` gets the highest system call number the table names here.
 * `allow` (NULL: none) names one call the box may make anyway: its deny
 * rows are left out and the allow list gets it (the kernel factory's box
 * enters the boxes nested in it with setns). */
enum s_which { F_ALLOW, F_DENY };

static scmp_filter_ctx
s_ctx_new(enum s_which which, bool audit, const char *allow, int *n_skipped,
          int *max_nr, err_t *err)
{
    uint32_t dflt = which == F_DENY ? SCMP_ACT_ALLOW
                    : audit         ? SCMP_ACT_NOTIFY
                                    : SCMP_ACT_ERRNO(EPERM);
    scmp_filter_ctx ctx = seccomp_init(dflt);
    if (!ctx) {
        err_set(err, ERR_SANDBOX, "seccomp: cannot initialise libseccomp");
        return NULL;
    }
    int rc =
        seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc == 0) /* we set NO_NEW_PRIVS ourselves, earlier */
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    if (rc == 0) /* a binary tree: ~250 rows cost a few compares, not 250 */
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (rc < 0) {
        err_errnum(err, ERR_SANDBOX, -rc, "seccomp: setting filter attributes");
        seccomp_release(ctx);
        return NULL;
    }
    *n_skipped = 0;
    *max_nr = 0;
    for (size_t i = 0; i < sizeof s_rules / sizeof s_rules[0]; i++) {
        const struct s_rule *r = &s_rules[i];
        int nr = seccomp_syscall_resolve_name(r->name);
        if (nr == __NR_SCMP_ERROR || nr < 0) {
            (*n_skipped)++; /* not a system call on this architecture */
            continue;
        }
        if (nr > *max_nr)
            *max_nr = nr;
        bool in = which == F_DENY
                      ? !r->allow
                      : r->allow || (r->cond == C_ALWAYS && r->errnum != EPERM);
        if (!in || (allow && strcmp(r->name, allow) == 0))
            continue;
        rc = s_add(ctx, r, nr);
        if (rc < 0) {
            err_errnum(err, ERR_SANDBOX, -rc, "seccomp: adding the rule for %s",
                       r->name);
            seccomp_release(ctx);
            return NULL;
        }
    }
    int nr = allow ? seccomp_syscall_resolve_name(allow) : -1;
    if (which == F_ALLOW && nr >= 0 &&
        (rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0) {
        err_errnum(err, ERR_SANDBOX, -rc, "seccomp: allowing %s", allow);
        seccomp_release(ctx);
        return NULL;
    }
    return ctx;
}

/* Export one filter's BPF into a new array; its length in *n. */
static struct sock_filter *
s_export(scmp_filter_ctx ctx, size_t *n, err_t *err)
{
    struct sock_filter *insns = NULL;
    int fd = memfd_create("ja-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        err_errno(err, ERR_SANDBOX, "seccomp: memfd_create");
        return NULL;
    }
    int e = seccomp_export_bpf(ctx, fd);
    off_t size = e < 0 ? -1 : lseek(fd, 0, SEEK_END);
    if (e < 0 || size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        size > (off_t)(BPF_MAXINSNS * sizeof(struct sock_filter))) {
        err_set(err, ERR_SANDBOX, "seccomp: exporting BPF: %s",
                e < 0 ? strerror(-e) : "bad program size");
        goto out;
    }
    insns = xmalloc((size_t)size);
    if (pread(fd, insns, (size_t)size, 0) != size) {
        err_errno(err, ERR_SANDBOX, "seccomp: reading BPF back");
        free(insns);
        insns = NULL;
        goto out;
    }
    *n = (size_t)size / sizeof(struct sock_filter);
out:
    close(fd);
    return insns;
}

#if defined(__x86_64__)
#define S_AUDIT_ARCH_NATIVE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define S_AUDIT_ARCH_NATIVE AUDIT_ARCH_AARCH64
#else
#define S_AUDIT_ARCH_NATIVE 0 /* no stub: newer calls get EPERM */
#endif
/* x32 calls carry this bit; libseccomp's program kills them. */
#define S_X32_BIT 0x40000000u

/* The stub in front of libseccomp's program: on the native architecture
 * (x86-64 without the x32 bit), a system call numbered above `max_nr`
 * is newer than this table and fails with ENOSYS, as runc does, so libc
 * can fall back to the call it replaces. Everything else goes on. */
static size_t
s_enosys_stub(struct sock_filter *out, int max_nr)
{
    struct sock_filter stub[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, S_AUDIT_ARCH_NATIVE, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, S_X32_BIT, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, (uint32_t)max_nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    };
    if (out)
        memcpy(out, stub, sizeof stub);
    return sizeof stub / sizeof stub[0];
}

static int s_compile(sb_seccomp_prog_t *out, bool audit, const char *extra,
                     err_t *err);

/* Compiling takes libseccomp a few milliseconds, a box start's budget: each
 * mode is compiled once per process and copied out (the table is const). */
int
sb_seccomp_build_mode(sb_seccomp_prog_t *out, bool audit, err_t *err)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static sb_seccomp_prog_t cache[2];
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&lock);
    sb_seccomp_prog_t *c = &cache[audit];
    if (!c->insns && s_compile(c, audit, NULL, err) < 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    *out = *c;
    out->insns = xmalloc(c->len * sizeof(struct sock_filter));
    memcpy(out->insns, c->insns, c->len * sizeof(struct sock_filter));
    pthread_mutex_unlock(&lock);
    return 0;
}

static int
s_compile(sb_seccomp_prog_t *out, bool audit, const char *extra, err_t *err)
{
    memset(out, 0, sizeof *out);
    int skipped = 0, max_nr = 0, unused = 0;
    size_t n_allow = 0, n_deny = 0;
    struct sock_filter *allow = NULL, *deny = NULL;
    scmp_filter_ctx ctx =
        s_ctx_new(F_ALLOW, audit, extra, &skipped, &max_nr, err);
    if (ctx)
        allow = s_export(ctx, &n_allow, err);
    seccomp_release(ctx);
    ctx = allow ? s_ctx_new(F_DENY, audit, extra, &unused, &unused, err) : NULL;
    if (ctx)
        deny = s_export(ctx, &n_deny, err);
    seccomp_release(ctx);
    if (!deny) {
        free(allow);
        return -1;
    }
    size_t stub =
        audit || !S_AUDIT_ARCH_NATIVE ? 0 : s_enosys_stub(NULL, max_nr);
    struct sock_filter *insns =
        xmalloc((stub + n_allow + n_deny) * sizeof *insns);
    s_enosys_stub(stub ? insns : NULL, max_nr);
    memcpy(insns + stub, allow, n_allow * sizeof *insns);
    memcpy(insns + stub + n_allow, deny, n_deny * sizeof *insns);
    free(allow);
    free(deny);
    out->insns = insns;
    out->len = stub + n_allow + n_deny;
    out->first_len = stub + n_allow;
    out->n_skipped = skipped;
    out->audit = audit;
    return 0;
}

int
sb_seccomp_build(sb_seccomp_prog_t *out, err_t *err)
{
    return sb_seccomp_build_mode(out, false, err);
}

int
sb_seccomp_build_allowing(sb_seccomp_prog_t *out, const char *syscall_name,
                          err_t *err)
{
    if (!syscall_name)
        return sb_seccomp_build(out, err);
    return s_compile(out, false, syscall_name, err); /* rare: not cached */
}

void
sb_seccomp_prog_release(sb_seccomp_prog_t *prog)
{
    if (!prog)
        return;
    free(prog->insns);
    memset(prog, 0, sizeof *prog);
}

int
sb_seccomp_install(const sb_seccomp_prog_t *prog)
{
    struct sock_filter *insns = prog->insns;
    /* The allow list first, so the deny filter (installed last, run
     * first) decides between two errnos: clone3 stays ENOSYS. */
    struct sock_fprog first = {.len = (unsigned short)prog->first_len,
                               .filter = insns};
    struct sock_fprog second = {
        .len = (unsigned short)(prog->len - prog->first_len),
        .filter = insns + prog->first_len};
    int listener = 0; /* first_len == 0: the deny rows alone */
    if (first.len > 0 && prog->audit)
        listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                SECCOMP_FILTER_FLAG_NEW_LISTENER, &first);
    else if (first.len > 0 &&
             prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &first, 0, 0) < 0)
        return -1;
    if (listener < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &second, 0, 0) < 0)
        return -1;
    return listener;
}

int
sb_seccomp_export_pfc(int fd, err_t *err)
{
    for (int which = F_ALLOW; which <= F_DENY; which++) {
        int skipped = 0, max_nr = 0;
        scmp_filter_ctx ctx =
            s_ctx_new((enum s_which)which, false, NULL, &skipped, &max_nr, err);
        if (!ctx)
            return -1;
        int rc = seccomp_export_pfc(ctx, fd);
        seccomp_release(ctx);
        if (rc < 0)
            return err_errnum(err, ERR_SANDBOX, -rc, "seccomp: exporting PFC");
    }
    return 0;
}
