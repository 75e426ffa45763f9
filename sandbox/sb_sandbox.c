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

#include "common/buf.h"
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

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef ST_RELATIME
#define ST_RELATIME 4096
#endif

/* When we run as root, inside uid/gid 0 and 1000 map to these host ids,
 * which belong to no one: the box never holds a real host identity. */
#define SB_ROOT_HOST_BASE 1000000u
#define SETUP_TIMEOUT_MS 60000

/* clone3's argument block (kernel ABI; declared here to avoid
 * <linux/sched.h>, which clashes with glibc's <sched.h>). */
struct s_clone_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
};

/* ---- messages between parent and pid 1 (SOCK_SEQPACKET) ---- */

enum s_msg_type {
    MSG_GO = 1,         /* parent: maps written, go ahead */
    MSG_WORKSPACE = 2,  /* pid 1: here is the workspace fd (SCM_RIGHTS) */
    MSG_FILES_DONE = 3, /* parent: files copied in, continue */
    MSG_ERROR = 4,      /* pid 1: step `text` failed with `errnum` */
    MSG_RUNNING = 5,    /* pid 1: the program was exec'ed */
    MSG_STATUS = 6,     /* pid 1: the program's wait status */
    MSG_NEST_PIDFD = 7, /* nesting helper: a pidfd (SCM_RIGHTS) */
    MSG_LISTENER = 8,   /* program: its seccomp audit listener (SCM_RIGHTS) */
    MSG_SOCKDIR = 9     /* pid 1: here is the socket dir's fd (SCM_RIGHTS) */
};

struct s_msg {
    int32_t type;   /* enum s_msg_type */
    int32_t code;   /* MSG_ERROR: err code (ERR_SANDBOX or ERR_USAGE) */
    int32_t errnum; /* MSG_ERROR: errno of the failed step */
    int32_t status; /* MSG_STATUS: wait status of the program */
    char text[512]; /* MSG_ERROR: the step, NUL-terminated */
};

/* ---- the mount plan ---- */

enum s_op_kind {
    OP_MKDIR,      /* mkdir -p dst */
    OP_SYMLINK,    /* symlink src -> dst */
    OP_BIND,       /* bind src on dst (read-only unless rw) */
    OP_DEVNODE,    /* bind a host device node (keeps dev semantics) */
    OP_TMPFS,      /* tmpfs on dst with data */
    OP_PROC,       /* fresh proc on dst */
    OP_PROC_RO,    /* dst (inside the new proc) bound read-only on itself */
    OP_DEVPTS,     /* private devpts instance */
    OP_WRITE,      /* create dst with content src (len bytes) */
    OP_REMOUNT_RO, /* make mount dst read-only */
    OP_WORKSPACE,  /* the /mnt/data tmpfs; its fd goes to the parent */
    OP_SOCKDIR     /* the socket dir's tmpfs; its fd goes to the parent */
};

struct s_op {
    enum s_op_kind kind; /* what to do */
    char *src;           /* owned: source path, link target or content */
    char *dst;           /* owned: absolute target under /newroot */
    char *data;          /* owned: mount data, or NULL */
    unsigned long flags; /* mount flags */
    size_t len;          /* OP_WRITE: content length */
    bool src_is_dir;     /* OP_BIND: make a directory (else file) */
    bool rw;             /* OP_BIND: leave writable */
    bool optional;       /* failure is not an error */
    bool own;            /* OP_WRITE: mode 0600, owned by the box's user */
    char *what;          /* owned: the step, for error messages */
};

struct s_plan {
    struct s_op *ops; /* owned array */
    size_t n;         /* entries used */
};

/* Everything pid 1 and the program need, prepared by the parent. */
struct s_child {
    int ctl;                   /* our end of the control socket */
    int stdio[3];              /* fds for the program's 0, 1, 2 (or -1) */
    bool root_mode;            /* launched by root: map 0 and 1000 */
    const struct s_plan *plan; /* the mounts */
    const sb_seccomp_prog_t *seccomp;      /* the program's filter */
    const sb_seccomp_prog_t *seccomp_init; /* init's (never audit) */
    const sb_landlock_plan_t *landlock;    /* the second wall */
    bool share_net;       /* test knob: stay in the launcher's netns */
    char *const *argv;    /* program */
    char *const *envp;    /* its complete environment */
    const char *hostname; /* inside */
    struct rlimit rl_nofile, rl_fsize, rl_nproc, rl_data; /* limits */
    bool limit_data; /* no memory cgroup: use RLIMIT_DATA */
    /* nested box (sb_sandbox_nest_in): pid 1 writes its own one-uid maps */
    bool map_self;
};

struct s_staged {
    char *host; /* owned: host path */
    char *name; /* owned: name in /mnt/data */
};

enum s_state { ST_NEW, ST_RUNNING, ST_REAPED };

struct sb_sandbox {
    sb_policy_t policy;         /* owned copy */
    enum s_state state;         /* lifecycle */
    bool root_mode;             /* euid 0 at new(): two-uid mapping */
    uid_t host_uid;             /* host uid of inside uid 1000 */
    gid_t host_gid;             /* host gid of inside gid 1000 */
    char *top_dir;              /* owned: /tmp/ja-XXXXXX (removed at destroy) */
    char *run_dir;              /* owned: top_dir/run (read-only inside) */
    char *sock_dir;             /* owned: top_dir/sock; inside a small tmpfs,
                                   on the host a symlink to it through
                                   /proc/<our pid>/fd/<sock_fd> */
    int sock_fd;                /* owned: the box's socket dir, or -1 */
    struct s_staged *box_files; /* owned: copied into sock_dir at spawn */
    size_t n_box_files;         /* entries in box_files */
    int lock_fd;                /* owned: top_dir, flock'ed while we live */
    char id[48];                /* "<pid>-<XXXXXX>", names the cgroup */
    sb_cgroup_t *cg;            /* owned */
    buf_t warnings;             /* "; "-separated */
    struct s_staged *files;     /* owned: queued for /mnt/data */
    size_t n_files;             /* entries in files */
    int stdin_fd;               /* borrowed, or -1 */
    pid_t pid;                  /* host pid of pid 1, or -1 */
    int pidfd;                  /* owned, or -1 */
    int ctl;                    /* owned control socket, or -1 */
    int ws_fd;                  /* owned workspace dir fd, or -1 */
    char ws_path[40];           /* "/proc/self/fd/N" */
    bool killed;                /* sb_sandbox_kill was called */
    bool finished;              /* sb_sandbox_finish ran */
    long oom_base;              /* cgroup OOM kills before this box started */
    sb_exit_t exit;             /* valid when state == ST_REAPED */
    /* borrowed: the box to nest in (sb_sandbox_nest_in), or NULL */
    const sb_sandbox_t *nest;
    /* the program's seccomp filter lets setns() through */
    bool allow_setns;
    /* owned; --seccomp-audit's counts, or NULL */
    sb_seccomp_audit_t *audit;
    /* killed and given to a reaper (sb_sandbox_hand_off) */
    bool handed_off;
};

/* Test-only weakenings (sb_sandbox.h): referenced weakly, so only a
 * program that defines the symbol (a test) can turn them on. */
extern sb_unsafe_test_knobs_t sb_unsafe_test_knobs __attribute__((weak));

static const sb_unsafe_test_knobs_t *
s_knobs(void)
{
    static const sb_unsafe_test_knobs_t none = {0};
    return &sb_unsafe_test_knobs ? &sb_unsafe_test_knobs : &none;
}

/* ====================================================================
 * Child side: async-signal-safe helpers only.
 * ==================================================================== */

static size_t
s_cpy(char *dst, size_t size, size_t at, const char *src)
{
    while (*src && at + 1 < size)
        dst[at++] = *src++;
    dst[at < size ? at : size - 1] = '\0';
    return at;
}

static void
s_send(int fd, int type, int code, int errnum, int status, const char *text,
       const char *arg, int pass_fd)
{
    struct s_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.code = code;
    m.errnum = errnum;
    m.status = status;
    size_t at = 0;
    if (text)
        at = s_cpy(m.text, sizeof m.text, at, text);
    if (arg) {
        at = s_cpy(m.text, sizeof m.text, at, " ");
        s_cpy(m.text, sizeof m.text, at, arg);
    }
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        memset(&cm, 0, sizeof cm);
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof cm.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

/* Report a failed setup step of pid 1 and die. */
__attribute__((noreturn)) static void
s_die(const struct s_child *c, const char *step, const char *arg)
{
    s_send(c->ctl, MSG_ERROR, ERR_SANDBOX, errno, 0, step, arg, -1);
    _exit(126);
}

/* Receive one message; returns its type, 0 on EOF, -1 on error. */
static int
s_recv(int fd, struct s_msg *m, int *passed_fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = m, .iov_len = sizeof *m};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    ssize_t n;
    while ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (n <= 0)
        return (int)n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int fd_in;
            memcpy(&fd_in, CMSG_DATA(c), sizeof fd_in);
            if (passed_fd)
                *passed_fd = fd_in;
            else
                close(fd_in);
        }
    }
    if ((size_t)n != sizeof *m)
        return -1;
    m->text[sizeof m->text - 1] = '\0';
    return m->type;
}

/* mkdir -p for an absolute path, in a stack copy. */
static int
s_mkdir_p(const char *path, mode_t mode)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0')
            continue;
        char saved = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, mode) < 0 && errno != EEXIST)
            return -1;
        tmp[i] = saved;
    }
    return 0;
}

static int
s_mkdir_parent(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, n + 1);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp)
        return 0;
    *slash = '\0';
    return s_mkdir_p(tmp, 0755);
}

/* Flags a remount inside a user namespace must keep (they are locked). */
static unsigned long
s_locked_flags(const char *path)
{
    struct statfs sf;
    unsigned long f = 0;
    if (statfs(path, &sf) < 0)
        return 0;
    if (sf.f_flags & ST_NOSUID)
        f |= MS_NOSUID;
    if (sf.f_flags & ST_NODEV)
        f |= MS_NODEV;
    if (sf.f_flags & ST_NOEXEC)
        f |= MS_NOEXEC;
    if (sf.f_flags & ST_NOATIME)
        f |= MS_NOATIME;
    if (sf.f_flags & ST_NODIRATIME)
        f |= MS_NODIRATIME;
    if (sf.f_flags & ST_RELATIME)
        f |= MS_RELATIME;
    return f;
}

static int
s_remount_ro(const char *path, unsigned long extra)
{
    return mount(
        NULL, path, NULL,
        MS_REMOUNT | MS_BIND | MS_RDONLY | extra | s_locked_flags(path), NULL);
}

/* Run one plan step; returns 0 or -1 with errno. */
static int
s_run_op(const struct s_child *c, const struct s_op *op)
{
    switch (op->kind) {
    case OP_MKDIR:
        return s_mkdir_p(op->dst, 0755);
    case OP_SYMLINK:
        if (s_mkdir_parent(op->dst) < 0)
            return -1;
        return symlink(op->src, op->dst);
    case OP_BIND:
    case OP_DEVNODE: {
        if (op->src_is_dir) {
            if (s_mkdir_p(op->dst, 0755) < 0)
                return -1;
        } else {
            if (s_mkdir_parent(op->dst) < 0)
                return -1;
            int fd = open(op->dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
            if (fd < 0 && errno != EEXIST)
                return -1;
            if (fd >= 0)
                close(fd);
        }
        if (mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
            return -1;
        if (op->kind == OP_DEVNODE)
            return 0;
        if (op->rw)
            return mount(NULL, op->dst, NULL,
                         MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV |
                             s_locked_flags(op->dst),
                         NULL);
        return s_remount_ro(op->dst, MS_NOSUID | MS_NODEV);
    }
    case OP_TMPFS:
    case OP_WORKSPACE:
    case OP_SOCKDIR:
        if (s_mkdir_p(op->dst, 0755) < 0)
            return -1;
        if (mount("tmpfs", op->dst, "tmpfs", op->flags, op->data) < 0)
            return -1;
        if (op->kind == OP_SOCKDIR) {
            int fd = open(op->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                return -1;
            s_send(c->ctl, MSG_SOCKDIR, 0, 0, 0, NULL, NULL, fd);
            close(fd);
        }
        if (op->kind == OP_WORKSPACE) {
            int fd = open(op->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                return -1;
            s_send(c->ctl, MSG_WORKSPACE, 0, 0, 0, NULL, NULL, fd);
            close(fd);
            struct s_msg m;
            if (s_recv(c->ctl, &m, NULL) != MSG_FILES_DONE)
                _exit(125); /* the parent gave up; it reports why */
        }
        return 0;
    case OP_PROC:
        if (s_mkdir_p(op->dst, 0755) < 0)
            return -1;
        if (mount("proc", op->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "hidepid=invisible") == 0)
            return 0;
        return mount("proc", op->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "hidepid=2");
    case OP_PROC_RO:
        if (mount(op->dst, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
            return -1;
        return s_remount_ro(op->dst, MS_NOSUID | MS_NODEV | MS_NOEXEC);
    case OP_DEVPTS:
        if (s_mkdir_p(op->dst, 0755) < 0)
            return -1;
        return mount("devpts", op->dst, "devpts", MS_NOSUID | MS_NOEXEC,
                     "newinstance,ptmxmode=0666,mode=0620");
    case OP_WRITE: {
        int fd = open(op->dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                      op->own ? 0600 : 0644);
        if (fd < 0)
            return -1;
        if (op->own && fchown(fd, SB_SANDBOX_UID, SB_SANDBOX_UID) < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        ssize_t w = write(fd, op->src, op->len);
        int e = errno;
        close(fd);
        errno = e;
        return w == (ssize_t)op->len ? 0 : -1;
    }
    case OP_REMOUNT_RO:
        return s_remount_ro(op->dst, 0);
    }
    errno = EINVAL;
    return -1;
}

static int
s_lo_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    s_cpy(ifr.ifr_name, sizeof ifr.ifr_name, 0, "lo");
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    int e = errno;
    close(s);
    errno = e;
    return rc;
}

/* Close every fd except 0-2 and those in keep[] (n <= 8). */
static void
s_close_others(const int *keep, int n)
{
    int k[8], m = 0;
    for (int i = 0; i < n && m < 8; i++)
        if (keep[i] > 2)
            k[m++] = keep[i];
    for (int i = 1; i < m; i++) /* insertion sort */
        for (int j = i; j > 0 && k[j - 1] > k[j]; j--) {
            int t = k[j];
            k[j] = k[j - 1];
            k[j - 1] = t;
        }
    unsigned lo = 3;
    for (int i = 0; i < m; i++) {
        if ((unsigned)k[i] > lo)
            syscall(SYS_close_range, lo, (unsigned)k[i] - 1, 0);
        if ((unsigned)k[i] + 1 > lo)
            lo = (unsigned)k[i] + 1;
    }
    syscall(SYS_close_range, lo, ~0U, 0);
}

/* The program: never returns. Errors go to `ep` as an s_msg. */
__attribute__((noreturn)) static void
s_program(const struct s_child *c, int ep, int landlock)
{
    struct s_msg m;
    const char *step = NULL, *arg = NULL;
    int code = ERR_SANDBOX;

    /* Init is not dumpable (it holds a copy of the launcher's memory); the
     * program is, so its /proc/self belongs to it. */
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &sa, NULL); /* glibc-reserved ones fail: fine */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    if (setsid() < 0) {
        step = "setsid";
        goto fail;
    }
    /* stdio: move to high fds first so 0/1/2 can be permuted safely. */
    int hi[3];
    for (int i = 0; i < 3; i++) {
        int src = c->stdio[i];
        if (src < 0) {
            src = open("/dev/null", i == 0 ? O_RDONLY : O_WRONLY);
            if (src < 0) {
                step = "open /dev/null";
                goto fail;
            }
        }
        hi[i] = fcntl(src, F_DUPFD_CLOEXEC, 64);
        if (hi[i] < 0) {
            step = "set up stdio";
            goto fail;
        }
    }
    for (int i = 0; i < 3; i++)
        if (dup2(hi[i], i) < 0) {
            step = "set up stdio";
            goto fail;
        }
    if (chdir(SB_WORKSPACE_PATH) < 0) {
        step = "chdir " SB_WORKSPACE_PATH;
        goto fail;
    }
    /* The program, not init, is the one to go when memory runs out. */
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) {
        if (write(oom, "1000", 4) < 0) { /* best effort */
        }
        close(oom);
    }
    struct rlimit zero = {0, 0};
    if (setrlimit(RLIMIT_CORE, &zero) < 0 ||
        setrlimit(RLIMIT_NOFILE, &c->rl_nofile) < 0 ||
        setrlimit(RLIMIT_FSIZE, &c->rl_fsize) < 0 ||
        setrlimit(RLIMIT_NPROC, &c->rl_nproc) < 0 ||
        (c->limit_data && setrlimit(RLIMIT_DATA, &c->rl_data) < 0)) {
        step = "set resource limits";
        goto fail;
    }
    if (sb_drop_to_user(SB_SANDBOX_UID, &step) < 0)
        goto fail;
    /* After the last credential change, which clears it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
        step = "set the parent-death signal";
        goto fail;
    }
    if (getppid() != 1)
        _exit(125); /* init died meanwhile */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        step = "mark fds close-on-exec";
        goto fail;
    }
    if (landlock >= 0 && sb_landlock_enforce(landlock) < 0) {
        step = "enforce the Landlock ruleset";
        goto fail;
    }
    int listener = c->seccomp ? sb_seccomp_install(c->seccomp) : 0;
    if (listener < 0) {
        step = "install the seccomp filter";
        goto fail;
    }
    if (c->seccomp && c->seccomp->audit) { /* out before anything runs */
        s_send(c->ctl, MSG_LISTENER, 0, 0, 0, NULL, NULL, listener);
        close(listener);
    }
    execve(c->argv[0], c->argv, c->envp);
    step = "exec";
    arg = c->argv[0];
    code = ERR_USAGE;
fail:
    memset(&m, 0, sizeof m);
    m.type = MSG_ERROR;
    m.code = code;
    m.errnum = errno;
    size_t at = s_cpy(m.text, sizeof m.text, 0, step);
    if (arg) {
        at = s_cpy(m.text, sizeof m.text, at, " ");
        s_cpy(m.text, sizeof m.text, at, arg);
    }
    if (write(ep, &m, sizeof m) < 0) { /* nothing more to do */
    }
    _exit(127);
}

/* A nested box's pid 1 maps its one user itself: uid and gid 1000 inside
 * to its own ids (1000 in the outer box), as an unprivileged owner of a
 * user namespace may; only the outer namespace's members could write the
 * maps from outside. */
static int
s_map_self(void)
{
    static const char *const files[] = {
        "/proc/self/setgroups", "/proc/self/uid_map", "/proc/self/gid_map"};
    static const char *const text[] = {"deny", "1000 1000 1\n",
                                       "1000 1000 1\n"};
    /* The helper's uid change made us undumpable, which gives our /proc
     * files to root: dumpable just for these writes (nothing that could
     * ptrace us sees us yet; init turns it off again below anyway). */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) {
        int fd = open(files[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = -1;
            break;
        }
        ssize_t n = write(fd, text[i], strlen(text[i]));
        int e = errno;
        close(fd);
        errno = e;
        if (n != (ssize_t)strlen(text[i]))
            rc = -1;
    }
    int e = errno;
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    errno = e;
    return rc;
}

__attribute__((noreturn)) static void s_init(const struct s_child *c);

/* The nesting helpers (sb_sandbox_nest_in): children of the launcher,
 * single-threaded, raw calls only. The first joins the user and pid
 * namespaces of the outer box's pid 1, becomes uid/gid 1000 there and
 * starts the second as the launcher's child (CLONE_PARENT), then exits.
 * The second is born inside the outer pid namespace (a pid namespace can
 * only be made from inside its parent), sends its own pidfd, clones the
 * box (again the launcher's child: it reaps and watches it as any box)
 * and sends the box's pidfd. The box's user namespace is then owned by
 * the outer box's uid 1000, which is what lets that box's unprivileged
 * program setns() into it. Reports on `rep`. */
__attribute__((noreturn)) static void
s_nest_helper(const int nsfd[2], const struct s_clone_args *ca,
              const struct s_child *c, int rep)
{
    bool was_root = geteuid() == 0;
    const char *step = "join the outer box's user and pid namespaces";
    if (setns(nsfd[0], CLONE_NEWUSER) < 0 || setns(nsfd[1], CLONE_NEWPID) < 0)
        goto fail;
    step = "drop supplementary groups in the outer box";
    if (syscall(SYS_setgroups, 0, NULL) < 0 && was_root)
        goto fail;
    step = "become uid 1000 in the outer box";
    if (syscall(SYS_setresgid, SB_SANDBOX_UID, SB_SANDBOX_UID, SB_SANDBOX_UID) <
            0 ||
        syscall(SYS_setresuid, SB_SANDBOX_UID, SB_SANDBOX_UID, SB_SANDBOX_UID) <
            0)
        goto fail;
    step = "start the nesting helper";
    struct s_clone_args a;
    memset(&a, 0, sizeof a);
    a.flags = CLONE_PARENT;
    long h2 = syscall(SYS_clone3, &a, sizeof a);
    if (h2 < 0)
        goto fail;
    if (h2 > 0)
        _exit(0);
    step = "open the nesting helper's pidfd";
    int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (self < 0)
        goto fail;
    s_send(rep, MSG_NEST_PIDFD, 0, 0, 0, NULL, NULL, self);
    step = "creating namespaces nested in the outer box (clone3)";
    int boxfd = -1;
    a = *ca;
    a.flags |= CLONE_PARENT | CLONE_PIDFD;
    a.pidfd = (uint64_t)(uintptr_t)&boxfd;
    a.exit_signal = 0; /* CLONE_PARENT: the launcher's SIGCHLD */
    long pid = syscall(SYS_clone3, &a, sizeof a);
    if (pid == 0)
        s_init(c); /* never returns */
    if (pid < 0)
        goto fail;
    s_send(rep, MSG_NEST_PIDFD, 0, 0, 0, NULL, NULL, boxfd);
    _exit(0);
fail:
    s_send(rep, MSG_ERROR, ERR_SANDBOX, errno, 0, step, NULL, -1);
    _exit(1);
}

/* pid 1: set up the box, run the program, reap, forward. */
__attribute__((noreturn)) static void
s_init(const struct s_child *c)
{
    struct s_msg m;
    int keep[4] = {c->ctl, c->stdio[0], c->stdio[1], c->stdio[2]};
    s_close_others(keep, 4);
    if (s_recv(c->ctl, &m, NULL) != MSG_GO)
        _exit(125);
    if (c->map_self && s_map_self() < 0)
        s_die(c, "map uid and gid 1000 in the nested box", NULL);
    if (c->root_mode) {
        if (syscall(SYS_setgroups, 0, NULL) < 0)
            s_die(c, "drop supplementary groups", NULL);
        if (syscall(SYS_setresgid, 0, 0, 0) < 0)
            s_die(c, "setresgid 0 inside", NULL);
        if (syscall(SYS_setresuid, 0, 0, 0) < 0)
            s_die(c, "setresuid 0 inside", NULL);
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        s_die(c, "set the parent-death signal", NULL);
    struct pollfd pf = {.fd = c->ctl, .events = POLLIN};
    if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR)))
        _exit(125); /* the launcher died before PDEATHSIG was armed */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    if (unshare(CLONE_NEWCGROUP) < 0)
        s_die(c, "new cgroup namespace", NULL);
    if (sethostname(c->hostname, strlen(c->hostname)) < 0)
        s_die(c, "set the host name", NULL);
    if (!c->share_net && s_lo_up() < 0)
        s_die(c, "bring up the loopback interface", NULL);

    if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
        s_die(c, "make mounts private", NULL);
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
              "size=8m,mode=0755") < 0)
        s_die(c, "mount the root tmpfs", NULL);
    if (chdir("/tmp") < 0 || mkdir("newroot", 0755) < 0 ||
        mount("newroot", "newroot", NULL, MS_BIND | MS_REC, NULL) < 0 ||
        mkdir("oldroot", 0755) < 0)
        s_die(c, "prepare the new root", NULL);
    if (syscall(SYS_pivot_root, ".", "oldroot") < 0 || chdir("/") < 0)
        s_die(c, "pivot_root to the staging root", NULL);

    for (size_t i = 0; i < c->plan->n; i++) {
        const struct s_op *op = &c->plan->ops[i];
        if (s_run_op(c, op) < 0 && !op->optional)
            s_die(c, op->what, NULL);
    }

    if (umount2("/oldroot", MNT_DETACH) < 0)
        s_die(c, "detach the host root", NULL);
    if (chdir("/newroot") < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
        umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
        s_die(c, "pivot_root to the new root", NULL);
    if (s_remount_ro("/", MS_NOSUID | MS_NODEV) < 0)
        s_die(c, "remount / read-only", NULL);
    int landlock = sb_landlock_prepare(c->landlock);
    if (landlock == -1)
        s_die(c, "build the Landlock ruleset", NULL);

    sigset_t set;
    sigemptyset(&set);
    int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaddset(&set, fwd[i]);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        s_die(c, "block signals", NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0)
        s_die(c, "signalfd", NULL);
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        s_die(c, "pipe", NULL);
    pid_t kid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (kid < 0)
        s_die(c, "fork the program", NULL);
    if (kid == 0) {
        close(ep[0]);
        close(sfd);
        s_program(c, ep[1], landlock);
    }
    close(ep[1]);
    /* Init keeps nothing of the program's stdio. */
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++) {
        if (c->stdio[i] > 2)
            close(c->stdio[i]);
        if (devnull >= 0)
            dup2(devnull, i);
    }
    if (devnull > 2)
        close(devnull);
    /* Init keeps CAP_KILL (in the box's user namespace only) so it can
     * forward signals to the program, which runs as another uid. */
    if (sb_drop_caps(CAP_KILL) < 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        (landlock >= 0 && sb_landlock_enforce(landlock) < 0) ||
        (c->seccomp_init && sb_seccomp_install(c->seccomp_init) < 0))
        s_die(c, "restrict init", NULL);
    if (landlock >= 0)
        close(landlock);

    ssize_t n;
    while ((n = read(ep[0], &m, sizeof m)) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    if (n == (ssize_t)sizeof m) {
        m.text[sizeof m.text - 1] = '\0';
        s_send(c->ctl, MSG_ERROR, m.code, m.errnum, 0, m.text, NULL, -1);
        _exit(126);
    }
    s_send(c->ctl, MSG_RUNNING, 0, 0, 0, NULL, NULL, -1);

    for (;;) {
        struct signalfd_siginfo si;
        n = read(sfd, &si, sizeof si);
        if (n != (ssize_t)sizeof si)
            continue;
        if (si.ssi_signo != SIGCHLD) {
            kill(kid, (int)si.ssi_signo);
            continue;
        }
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
            if (p != kid)
                continue;
            s_send(c->ctl, MSG_STATUS, 0, 0, st, NULL, NULL, -1);
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
    }
}

/* ====================================================================
 * Parent side.
 * ==================================================================== */

static struct s_op *
s_plan_add(struct s_plan *pl, enum s_op_kind kind, const char *dst,
           const char *what)
{
    pl->ops = xrealloc(pl->ops, (pl->n + 1) * sizeof *pl->ops);
    struct s_op *op = &pl->ops[pl->n++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->dst = xasprintf("/newroot%s", dst);
    op->what = xstrdup(what);
    return op;
}

static void
s_plan_release(struct s_plan *pl)
{
    for (size_t i = 0; i < pl->n; i++) {
        free(pl->ops[i].src);
        free(pl->ops[i].dst);
        free(pl->ops[i].data);
        free(pl->ops[i].what);
    }
    free(pl->ops);
    pl->ops = NULL;
    pl->n = 0;
}

static void
s_plan_bind(struct s_plan *pl, const char *host, const char *inside, bool rw,
            bool optional)
{
    struct stat st;
    bool have = stat(host, &st) == 0;
    if (!have && optional)
        return;
    char *what =
        xasprintf("bind %s%s%s", host, strcmp(host, inside) ? " to " : "",
                  strcmp(host, inside) ? inside : "");
    char *what2 = xasprintf("%s %s", what, rw ? "read-write" : "read-only");
    struct s_op *op = s_plan_add(pl, OP_BIND, inside, what2);
    free(what);
    free(what2);
    op->src = xasprintf("/oldroot%s", host);
    op->src_is_dir = have && S_ISDIR(st.st_mode);
    op->rw = rw;
    op->optional = optional;
}

static void
s_plan_write(struct s_plan *pl, const char *inside, const char *content)
{
    char *what = xasprintf("write %s", inside);
    struct s_op *op = s_plan_add(pl, OP_WRITE, inside, what);
    free(what);
    op->src = xstrdup(content);
    op->len = strlen(content);
}

static void
s_plan_symlink(struct s_plan *pl, const char *target, const char *inside)
{
    char *what = xasprintf("symlink %s -> %s", inside, target);
    struct s_op *op = s_plan_add(pl, OP_SYMLINK, inside, what);
    free(what);
    op->src = xstrdup(target);
}

static void
s_plan_tmpfs(struct s_plan *pl, enum s_op_kind kind, const char *inside,
             uint64_t size, const char *mode_opts, unsigned long flags)
{
    char sz[64];
    char *what = xasprintf("mount tmpfs on %s (%s)", inside,
                           sb_policy_format_bytes(size, sz, sizeof sz));
    struct s_op *op = s_plan_add(pl, kind, inside, what);
    free(what);
    op->data = xasprintf("size=%llu,%s", (unsigned long long)size, mode_opts);
    op->flags = flags;
}

/* /bin, /lib, ...: the same symlink as on the host, or a read-only bind. */
static void
s_plan_top_link(struct s_plan *pl, const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return;
    if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            return;
        target[n] = '\0';
        s_plan_symlink(pl, target, path);
    } else if (S_ISDIR(st.st_mode)) {
        s_plan_bind(pl, path, path, false, true);
    }
}

/* A small regular file's bytes (new buffer), refusing links and more
 * than `max` bytes. 0 or -1. */
static int
s_read_small(const char *path, size_t max, char **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > max) {
        close(fd);
        return -1;
    }
    char *buf = xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return 0;
}

/* Landlock (sb_landlock.c, s_box_paths) allows only the trees it lists:
 * a new bind outside /usr, /etc and /proc needs a row there too. */
static void
s_plan_build(const sb_sandbox_t *sb, struct s_plan *pl)
{
    const sb_policy_t *p = &sb->policy;
    memset(pl, 0, sizeof *pl);
    s_plan_bind(pl, "/usr", "/usr", false, false);
    static const char *const tops[] = {"/bin",   "/sbin",  "/lib",
                                       "/lib64", "/lib32", "/libx32"};
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++)
        s_plan_top_link(pl, tops[i]);

    s_plan_add(pl, OP_MKDIR, "/etc", "create /etc");
    s_plan_write(
        pl, "/etc/passwd",
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        "user:x:1000:1000:sandbox user:" SB_HOME_PATH ":/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    s_plan_write(pl, "/etc/group",
                 "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n");
    s_plan_write(pl, "/etc/hosts",
                 "127.0.0.1\tlocalhost sandbox\n"
                 "::1\tlocalhost ip6-localhost ip6-loopback\n");
    s_plan_write(pl, "/etc/hostname", "sandbox\n");
    s_plan_write(pl, "/etc/nsswitch.conf",
                 "passwd: files\ngroup: files\nshadow: files\n"
                 "hosts: files\nnetworks: files\nprotocols: files\n"
                 "services: files\n");
    s_plan_write(pl, "/etc/resolv.conf",
                 "# no network in the sandbox: names resolve from /etc/hosts "
                 "only\noptions attempts:1 timeout:1\n");
    static const char *const etc[] = {
        "/etc/ld.so.cache",  "/etc/ld.so.conf", "/etc/ld.so.conf.d",
        "/etc/alternatives", "/etc/fonts",      "/etc/matplotlibrc",
        "/etc/mime.types",   "/etc/ssl",        "/etc/ca-certificates",
        "/etc/protocols",    "/etc/services",   "/etc/host.conf",
        "/etc/gai.conf",     "/etc/python3",    "/etc/python3.11",
        "/etc/timezone",     "/etc/magic",      "/etc/papersize"};
    for (size_t i = 0; i < sizeof etc / sizeof etc[0]; i++)
        s_plan_bind(pl, etc[i], etc[i], false, true);
    struct stat st;
    if (lstat("/etc/localtime", &st) == 0 && S_ISLNK(st.st_mode))
        s_plan_top_link(pl, "/etc/localtime");
    else
        s_plan_bind(pl, "/etc/localtime", "/etc/localtime", false, true);
    s_plan_bind(pl, "/var/cache/fontconfig", "/var/cache/fontconfig", false,
                true);

    /* /dev: a read-only tmpfs with a few host nodes bound in. */
    s_plan_tmpfs(pl, OP_TMPFS, "/dev", 65536, "mode=0755",
                 MS_NOSUID | MS_NOEXEC);
    static const char *const nodes[] = {"null",   "zero",    "full",
                                        "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char host[64], what[96];
        snprintf(host, sizeof host, "/dev/%s", nodes[i]);
        snprintf(what, sizeof what, "bind device %s", host);
        struct s_op *op = s_plan_add(pl, OP_DEVNODE, host, what);
        op->src = xasprintf("/oldroot%s", host);
        op->optional = strcmp(nodes[i], "tty") == 0;
    }
    s_plan_symlink(pl, "/proc/self/fd", "/dev/fd");
    s_plan_symlink(pl, "/proc/self/fd/0", "/dev/stdin");
    s_plan_symlink(pl, "/proc/self/fd/1", "/dev/stdout");
    s_plan_symlink(pl, "/proc/self/fd/2", "/dev/stderr");
    s_plan_tmpfs(pl, OP_TMPFS, "/dev/shm", p->shm_bytes, "mode=1777",
                 MS_NOSUID | MS_NODEV);
    struct s_op *pts = s_plan_add(pl, OP_DEVPTS, "/dev/pts", "mount devpts");
    pts->optional = true;
    s_plan_symlink(pl, "pts/ptmx", "/dev/ptmx");
    s_plan_add(pl, OP_REMOUNT_RO, "/dev", "remount /dev read-only");

    s_plan_add(pl, OP_PROC, "/proc", "mount /proc");
    static const char *const proc_ro[] = {"/proc/sys", "/proc/sysrq-trigger",
                                          "/proc/irq", "/proc/bus"};
    for (size_t i = 0; i < sizeof proc_ro / sizeof proc_ro[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "make %s read-only", proc_ro[i]);
        s_plan_add(pl, OP_PROC_RO, proc_ro[i], what)->optional = true;
    }

    s_plan_tmpfs(pl, OP_TMPFS, "/tmp", p->tmp_bytes, "mode=1777",
                 MS_NOSUID | MS_NODEV);
    s_plan_tmpfs(pl, OP_TMPFS, SB_HOME_PATH, p->tmp_bytes,
                 "mode=0700,uid=1000,gid=1000", MS_NOSUID | MS_NODEV);
    s_plan_tmpfs(pl, OP_WORKSPACE, SB_WORKSPACE_PATH, p->workspace_bytes,
                 "mode=0755,uid=1000,gid=1000", MS_NOSUID | MS_NODEV);
    /* The run dir is host storage: read-only inside. What the box must
     * write there (the kernel's sockets) goes to the socket dir, a small
     * tmpfs (SB_SOCK_DIR_BYTES, SB_SOCK_DIR_INODES) the host reaches
     * through a symlink (see s_link_sock_dir). */
    s_plan_bind(pl, sb->run_dir, sb->run_dir, false, false);
    char opts[96];
    snprintf(opts, sizeof opts, "nr_inodes=%d,mode=0700,uid=%d,gid=%d",
             SB_SOCK_DIR_INODES, SB_SANDBOX_UID, SB_SANDBOX_UID);
    s_plan_tmpfs(pl, OP_SOCKDIR, sb->sock_dir, SB_SOCK_DIR_BYTES, opts,
                 MS_NOSUID | MS_NODEV | MS_NOEXEC);
    /* Files the host hands the box to use in place (a connection file
     * ipykernel rewrites, matplotlib's cache): copied in at each spawn,
     * as read now. */
    for (size_t i = 0; i < sb->n_box_files; i++) {
        char *data = NULL;
        size_t len = 0;
        if (s_read_small(sb->box_files[i].host, SB_SOCK_DIR_BYTES / 4, &data,
                         &len) < 0)
            continue;
        char *inside = xasprintf("%s/%s", sb->sock_dir, sb->box_files[i].name);
        char *what = xasprintf("copy %s to %s", sb->box_files[i].host, inside);
        struct s_op *op = s_plan_add(pl, OP_WRITE, inside, what);
        op->src = data;
        op->len = len;
        op->own = true;
        free(what);
        free(inside);
    }
    for (size_t i = 0; i < p->n_binds; i++)
        s_plan_bind(pl, p->binds[i].host, p->binds[i].inside, false, false);
    const sb_unsafe_test_knobs_t *k = s_knobs();
    if (k->rw_bind_host && k->rw_bind_inside)
        s_plan_bind(pl, k->rw_bind_host, k->rw_bind_inside, true, false);
}

static const char *
s_tmp_base(void)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && x[0] == '/' && strlen(x) < 40 && access(x, W_OK | X_OK) == 0)
        return x;
    return "/tmp";
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
    sb->pidfd = sb->ctl = sb->ws_fd = sb->stdin_fd = sb->lock_fd = -1;
    sb->sock_fd = -1;
    sb->root_mode = geteuid() == 0;
    sb->host_uid =
        sb->root_mode ? SB_ROOT_HOST_BASE + SB_SANDBOX_UID : geteuid();
    sb->host_gid =
        sb->root_mode ? SB_ROOT_HOST_BASE + SB_SANDBOX_UID : getegid();
    for (size_t i = 0; i < p->n_binds; i++) {
        if (access(p->binds[i].host, F_OK) < 0) {
            err_set(err, ERR_USAGE, "--bind: '%s': %s", p->binds[i].host,
                    strerror(errno));
            goto fail;
        }
    }
    s_gc_run_dirs(s_tmp_base(), sb->host_uid);
    sb->top_dir = xasprintf("%s/ja-sb-XXXXXX", s_tmp_base());
    if (!mkdtemp(sb->top_dir)) {
        err_set(err, ERR_SANDBOX, "sandbox: creating %s: %s", sb->top_dir,
                strerror(errno));
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
         (chown(sb->top_dir, sb->host_uid, sb->host_gid) < 0 ||
          chown(sb->run_dir, sb->host_uid, sb->host_gid) < 0))) {
        err_set(err, ERR_SANDBOX, "sandbox: preparing run dir %s: %s",
                sb->run_dir, strerror(errno));
        goto fail;
    }
    snprintf(sb->id, sizeof sb->id, "%d-%s", (int)getpid(),
             strrchr(sb->top_dir, '-') + 1);
    sb->cg = sb_cgroup_new(&sb->policy, sb->id);
    if (sb_cgroup_warning(sb->cg))
        buf_puts(&sb->warnings, sb_cgroup_warning(sb->cg));
    const char *gap = sb_landlock_gap(sb_landlock_abi());
    if (gap)
        buf_printf(&sb->warnings, "%s%s", sb->warnings.len ? "; " : "", gap);
    return sb;
fail:
    sb_sandbox_destroy(&sb);
    return NULL;
}

const sb_policy_t *
sb_sandbox_policy(const sb_sandbox_t *sb)
{
    return &sb->policy;
}

const char *
sb_sandbox_run_dir(const sb_sandbox_t *sb)
{
    return sb->run_dir;
}

uid_t
sb_sandbox_host_uid(const sb_sandbox_t *sb)
{
    return sb->host_uid;
}

gid_t
sb_sandbox_host_gid(const sb_sandbox_t *sb)
{
    return sb->host_gid;
}

const char *
sb_sandbox_workspace(const sb_sandbox_t *sb)
{
    return sb->ws_fd >= 0 ? sb->ws_path : NULL;
}

int
sb_sandbox_workspace_fd(const sb_sandbox_t *sb)
{
    return sb->ws_fd;
}

char *
sb_sandbox_seccomp_audit_report(sb_sandbox_t *sb)
{
    if (!sb->policy.seccomp_audit)
        return NULL;
    char *calls = sb->audit ? sb_seccomp_audit_report(sb->audit) : NULL;
    char *out =
        xasprintf("seccomp audit: %s%s", calls ? "the allow list lacks " : "",
                  calls ? calls : "every system call was on the allow list");
    free(calls);
    return out;
}

const char *
sb_sandbox_warnings(const sb_sandbox_t *sb)
{
    return sb->warnings.len ? buf_cstr(&sb->warnings) : NULL;
}

const char *
sb_sandbox_cgroup_dir(const sb_sandbox_t *sb, const char *controller)
{
    return sb_cgroup_dir(sb->cg, controller);
}

pid_t
sb_sandbox_pid(const sb_sandbox_t *sb)
{
    return sb->pid;
}

int
sb_sandbox_pidfd(const sb_sandbox_t *sb)
{
    return sb->pidfd;
}

void
sb_sandbox_nest_in(sb_sandbox_t *sb, const sb_sandbox_t *outer)
{
    sb->nest = outer;
}

void
sb_sandbox_allow_setns(sb_sandbox_t *sb)
{
    sb->allow_setns = true;
}

void
sb_sandbox_set_stdin(sb_sandbox_t *sb, int fd)
{
    sb->stdin_fd = fd;
}

int
sb_sandbox_add_file(sb_sandbox_t *sb, const char *host_path,
                    const char *name_or_null, err_t *err)
{
    if (sb->state == ST_RUNNING)
        return err_set(err, ERR_USAGE,
                       "sandbox: files can only be added while no box runs");
    const char *name = name_or_null;
    char base[256];
    if (!name) {
        const char *end = host_path + strlen(host_path);
        while (end > host_path && end[-1] == '/')
            end--;
        const char *start = end;
        while (start > host_path && start[-1] != '/')
            start--;
        size_t n = (size_t)(end - start);
        if (n == 0 || n >= sizeof base)
            return err_set(err, ERR_USAGE, "--file '%s': no usable file name",
                           host_path);
        memcpy(base, start, n);
        base[n] = '\0';
        name = base;
    }
    if (sb_files_check_name(name, err) < 0)
        return err_prefix(err, "--file '%s'", host_path);
    for (size_t i = 0; i < sb->n_files; i++)
        if (strcmp(sb->files[i].name, name) == 0)
            return err_set(err, ERR_USAGE,
                           "--file '%s': /mnt/data/%s is already taken by '%s'",
                           host_path, name, sb->files[i].host);
    struct stat st;
    if (stat(host_path, &st) < 0)
        return err_set(err, ERR_USAGE, "--file '%s': %s", host_path,
                       strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(err, ERR_USAGE, "--file '%s': not a regular file",
                       host_path);
    if ((uint64_t)st.st_size > sb->policy.workspace_bytes)
        return err_set(err, ERR_USAGE,
                       "--file '%s': %lld bytes do not fit in /mnt/data; "
                       "raise --disk",
                       host_path, (long long)st.st_size);
    sb->files = xrealloc(sb->files, (sb->n_files + 1) * sizeof *sb->files);
    sb->files[sb->n_files].host = xstrdup(host_path);
    sb->files[sb->n_files].name = xstrdup(name);
    sb->n_files++;
    return 0;
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
        return err_set(err, ERR_SANDBOX, "sandbox: writing %s: %s", path,
                       strerror(errno));
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

/* Reap pid 1 without waiting; fills sb->exit. Returns 1 if reaped. */
static int
s_reap(sb_sandbox_t *sb, bool block)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int flags = WEXITED | (block ? 0 : WNOHANG);
    if (waitid((idtype_t)P_PIDFD, (id_t)sb->pidfd, &si, flags) < 0)
        return -1;
    if (si.si_pid == 0)
        return 0;
    sb->state = ST_REAPED;
    memset(&sb->exit, 0, sizeof sb->exit);
    struct s_msg m;
    int got_status = 0;
    for (;;) {
        struct pollfd pf = {.fd = sb->ctl, .events = POLLIN};
        if (sb->ctl < 0 || poll(&pf, 1, 0) <= 0 || !(pf.revents & POLLIN))
            break;
        int t = s_recv(sb->ctl, &m, NULL);
        if (t <= 0)
            break;
        if (t == MSG_STATUS)
            got_status = 1;
    }
    if (got_status) {
        if (WIFEXITED(m.status)) {
            sb->exit.kind = SB_EXITED;
            sb->exit.code = WEXITSTATUS(m.status);
        } else {
            sb->exit.kind = SB_SIGNALED;
            sb->exit.signal = WTERMSIG(m.status);
        }
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
    return 1;
}

pid_t
sb_sandbox_program_pid(const sb_sandbox_t *sb)
{
    if (sb->state != ST_RUNNING || sb->pid <= 0)
        return -1;
    char path[64], text[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)sb->pid,
             (int)sb->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    long pid = strtol(text, NULL, 10);
    return pid > 0 ? (pid_t)pid : -1;
}

pid_t
sb_pidfd_pid(int pidfd)
{
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    const char *p = strstr(text, "\nPid:");
    return p ? (pid_t)strtol(p + 6, NULL, 10) : -1;
}

/* clone3 `ca` nested in the box `outer` (see
 * s_nest_helper). Returns the box's host pid with *pidfd set, or -1 with
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
        return err_set(err, ERR_SANDBOX, "sandbox: socketpair: %s",
                       strerror(errno));
    }
    long h1 = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (h1 == 0) {
        close(sp[0]);
        s_nest_helper(nsfd, ca, c, sp[1]);
    }
    close(sp[1]);
    close(nsfd[0]);
    close(nsfd[1]);
    struct s_msg m = {0};
    while (h1 > 0 && n < 2) {
        int t = s_recv(sp[0], &m, &fds[n]);
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
            err_set(err, ERR_SANDBOX, "sandbox: %s: %s", m.text,
                    strerror(m.errnum));
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
    s_reap(sb, true);
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
            return err_set(err, ERR_SANDBOX, "sandbox: socket dir: %s",
                           strerror(errno));
        return 0;
    }
    sb->sock_fd = passed;
    char target[64];
    snprintf(target, sizeof target, "/proc/%d/fd/%d", (int)getpid(), passed);
    char *tmp = xasprintf("%s.new", sb->sock_dir);
    unlink(tmp);
    int rc = 0;
    if (symlink(target, tmp) < 0 || rename(tmp, sb->sock_dir) < 0)
        rc = err_set(err, ERR_SANDBOX, "sandbox: linking %s to %s: %s",
                     sb->sock_dir, target, strerror(errno));
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
    int rc = -1, sv[2] = {-1, -1};
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
    int old_ws = sb->ws_fd;
    sb->ws_fd = -1;
    if (sb->ctl >= 0)
        close(sb->ctl);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    sb->ctl = sb->pidfd = -1;
    sb->pid = -1;
    sb->killed = sb->finished = false;
    memset(&sb->exit, 0, sizeof sb->exit);
    sb->oom_base = sb_cgroup_oom_kills(sb->cg);
    s_plan_build(sb, &plan);
    sb_landlock_plan_t *landlock = xmalloc(sizeof *landlock);
    /* Not for the kernel factory's box (allow_setns): its program enters
     * nested boxes whose tmpfs a domain made here could not cover; each
     * kernel it forks applies its own box's rules (kb_zygote.py). */
    sb_landlock_plan_box(
        landlock,
        s_knobs()->no_landlock || sb->allow_setns ? 0 : sb_landlock_abi(),
        &sb->policy, sb->top_dir); /* run (read-only mount) and sock */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        err_set(err, ERR_SANDBOX, "sandbox: socketpair: %s", strerror(errno));
        goto out;
    }
    const sb_policy_t *p = &sb->policy;
    struct s_child c = {
        .ctl = sv[1],
        .stdio = {sb->stdin_fd, stdout_fd, stderr_fd},
        .root_mode = sb->root_mode && !nested,
        .map_self = nested,
        .plan = &plan,
        .seccomp = sb->policy.seccomp_audit ? &audit_prog : &prog,
        .seccomp_init = &prog,
        .landlock = landlock,
        .share_net = s_knobs()->share_netns,
        .argv = argv,
        .envp = envp,
        .hostname = "sandbox",
        .rl_nofile = {p->nofile, p->nofile},
        .rl_fsize = {sb_policy_fsize(p), sb_policy_fsize(p)},
        .rl_nproc = {p->pids, p->pids},
        .rl_data = {p->memory_bytes, p->memory_bytes},
        .limit_data = !sb_cgroup_limits_memory(sb->cg),
    };
    /* Benchmark knobs: today's deny rows alone, or no filter at all. */
    sb_seccomp_prog_t deny_only = prog;
    deny_only.insns = (char *)prog.insns + prog.first_len * 8;
    deny_only.len = prog.len - prog.first_len;
    deny_only.first_len = 0;
    if (s_knobs()->seccomp_deny_only)
        c.seccomp = c.seccomp_init = &deny_only;
    if (s_knobs()->no_seccomp)
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
    long pid = nested ? s_clone_nested(sb->nest, &ca, &c, &pidfd, err)
                      : syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0)
        s_init(&c); /* never returns */
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
    sv[1] = -1;
    sb->pid = (pid_t)pid;
    sb->pidfd = pidfd;
    sb->ctl = sv[0];
    sv[0] = -1;
    sb->state = ST_RUNNING;
    if (sb_cgroup_enter(sb->cg, sb->pid, err) < 0 ||
        (!nested && s_write_maps(sb, err) < 0)) {
        s_abort_spawn(sb);
        goto out;
    }
    s_parent_send(sb->ctl, MSG_GO);

    int64_t deadline = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    deadline =
        (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + SETUP_TIMEOUT_MS;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t left =
            deadline - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
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
        int t = s_recv(sb->ctl, &m, &passed);
        if (t == MSG_SOCKDIR && passed >= 0) {
            if (s_link_sock_dir(sb, passed, err) < 0) {
                s_abort_spawn(sb);
                goto out;
            }
        } else if (t == MSG_WORKSPACE && passed >= 0) {
            sb->ws_fd = passed;
            snprintf(sb->ws_path, sizeof sb->ws_path, "/proc/self/fd/%d",
                     passed);
            if (old_ws >= 0 &&
                sb_files_copy_tree(old_ws, passed, sb->policy.workspace_bytes,
                                   sb->root_mode ? sb->host_uid : (uid_t)-1,
                                   sb->host_gid, err) < 0) {
                err_prefix(err, "sandbox: carrying /mnt/data over");
                s_abort_spawn(sb);
                goto out;
            }
            if (s_copy_files_in(sb, err) < 0) {
                s_abort_spawn(sb);
                goto out;
            }
            s_parent_send(sb->ctl, MSG_FILES_DONE);
        } else if (t == MSG_ERROR) {
            err_set(err, m.code ? m.code : ERR_SANDBOX, "sandbox: %s: %s",
                    m.text, strerror(m.errnum));
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
            s_reap(sb, true);
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
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    s_plan_release(&plan);
    free(landlock);
    sb_seccomp_prog_release(&prog);
    sb_seccomp_prog_release(&audit_prog);
    return rc;
}

int
sb_sandbox_signal(sb_sandbox_t *sb, int sig)
{
    if (sb->state != ST_RUNNING) {
        errno = ESRCH;
        return -1;
    }
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
        if (s_reap(sb, true) < 0)
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

void
sb_sandbox_destroy(sb_sandbox_t **pp)
{
    if (!pp || !*pp)
        return;
    sb_sandbox_t *sb = *pp;
    *pp = NULL;
    if (!sb->handed_off)
        sb_sandbox_finish(sb, NULL);
    if (sb->ws_fd >= 0)
        close(sb->ws_fd);
    if (sb->sock_fd >= 0)
        close(sb->sock_fd);
    if (sb->ctl >= 0)
        close(sb->ctl);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    sb_seccomp_audit_destroy(&sb->audit);
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
    sb_policy_release(&sb->policy);
    free(sb);
}

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
    s_close_others(keep, 2);
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
    pid_t mid = fork();
    if (mid == 0) {
        pid_t reaper = fork();
        if (reaper == 0)
            s_reaper(sb);
        _exit(reaper < 0 ? 1 : 0);
    }
    int status = 1;
    while (mid > 0 && waitpid(mid, &status, 0) < 0 && errno == EINTR)
        ;
    /* Without a reaper, clean up here: slower, never leaky. */
    sb->handed_off = mid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    sb_sandbox_destroy(pp);
}

const char *
sb_exit_describe(const sb_exit_t *e, const sb_policy_t *p, char *buf,
                 size_t size)
{
    char lim[64];
    const char *name = NULL;
    switch (e->kind) {
    case SB_EXITED:
        snprintf(buf, size, "exited with status %d", e->code);
        break;
    case SB_OOM_KILLED:
        snprintf(
            buf, size, "killed: out of memory (limit %s)",
            sb_policy_format_bytes(p ? p->memory_bytes : 0, lim, sizeof lim));
        break;
    case SB_SIGNALED:
        name = sigabbrev_np(e->signal);
        snprintf(buf, size, "killed by signal %d (SIG%s)%s", e->signal,
                 name ? name : "?",
                 e->signal == SIGSYS ? ": a forbidden system call" : "");
        break;
    default:
        snprintf(buf, size, "has not ended");
    }
    return buf;
}

int
sb_exit_status(const sb_exit_t *e)
{
    return e->kind == SB_EXITED ? e->code : 128 + e->signal;
}

int
sb_sandbox_read_file(sb_sandbox_t *sb, const char *relpath, size_t max_bytes,
                     char **data, size_t *len, err_t *err)
{
    if (sb->ws_fd < 0)
        return err_set(err, ERR_USAGE, "sandbox: no workspace yet");
    return sb_files_read(sb->ws_fd, relpath, max_bytes, data, len, err);
}

int
sb_sandbox_copy_out(sb_sandbox_t *sb, const char *rel_dir,
                    const char *host_dest_dir, const sb_files_out_opts_t *o,
                    size_t *n_copied, err_t *err)
{
    if (n_copied)
        *n_copied = 0;
    if (sb->ws_fd < 0)
        return err_set(err, ERR_USAGE, "sandbox: no workspace yet");
    return sb_files_copy_out(sb->ws_fd, rel_dir, host_dest_dir, o, n_copied,
                             err);
}

int
sb_sandbox_mkdir(sb_sandbox_t *sb, const char *name, err_t *err)
{
    if (sb->ws_fd < 0)
        return err_set(err, ERR_SANDBOX,
                       "sandbox: /mnt/data exists only while the box runs");
    return sb_files_mkdir(sb->ws_fd, name,
                          sb->root_mode ? sb->host_uid : (uid_t)-1,
                          sb->host_gid, err);
}

json_t *
sb_sandbox_list_files(sb_sandbox_t *sb, size_t max_entries)
{
    if (sb->ws_fd < 0)
        return json_array();
    return sb_files_list(sb->ws_fd, max_entries);
}

bool
sb_sandbox_shows_host_path(const sb_sandbox_t *sb, const char *host_path)
{
    char *real = realpath(host_path, NULL);
    if (!real)
        return false;
    struct s_plan plan;
    s_plan_build(sb, &plan);
    bool shown = false;
    for (size_t i = 0; i < plan.n && !shown; i++) {
        const struct s_op *op = &plan.ops[i];
        /* src is "/oldroot" + host path, dst "/newroot" + inside path. */
        if (op->kind != OP_BIND || strncmp(op->src, "/oldroot", 8) ||
            strcmp(op->src + 8, op->dst + 8))
            continue; /* only binds that keep the host path */
        const char *host = op->src + 8;
        size_t n = strlen(host);
        shown = !strncmp(real, host, n) && (real[n] == '/' || !real[n]);
    }
    s_plan_release(&plan);
    free(real);
    return shown;
}

int
sb_sandbox_add_bind(sb_sandbox_t *sb, const char *host, err_t *err)
{
    return sb_policy_add_bind(&sb->policy, host, NULL, err);
}
