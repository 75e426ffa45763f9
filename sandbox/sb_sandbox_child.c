/* sb_sandbox_child: pid 1 and the program, from clone to exec (see
 * sb_sandbox.c and sb_sandbox_impl.h): no allocation, locks or stdio. */
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

#include "sandbox/sb_sandbox_impl.h"

const sb_unsafe_test_knobs_t *
sb_box_knobs(void)
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

void
sb_box_send(int fd, int type, int code, int errnum, int status,
            const char *text, const char *arg, int pass_fd)
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
__attribute__((noreturn)) void
sb_box_die(const struct s_child *c, const char *step, const char *arg)
{
    sb_box_send(c->ctl, MSG_ERROR, ERR_SANDBOX, errno, 0, step, arg, -1);
    _exit(126);
}

/* Receive one message; returns its type, 0 on EOF, -1 on error. */
int
sb_box_recv(int fd, struct s_msg *m, int *passed_fd)
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
            struct stat st; /* over a file of a read-only bind: it exists */
            int fd = stat(op->dst, &st) == 0
                         ? -2
                         : open(op->dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
            if (fd == -1 && errno != EEXIST)
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
            sb_box_send(c->ctl, MSG_SOCKDIR, 0, 0, 0, NULL, NULL, fd);
            close(fd);
        }
        if (op->kind == OP_WORKSPACE) {
            int fd = open(op->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                return -1;
            sb_box_send(c->ctl, MSG_WORKSPACE, 0, 0, 0, NULL, NULL, fd);
            close(fd);
            struct s_msg m;
            if (sb_box_recv(c->ctl, &m, NULL) != MSG_FILES_DONE)
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
        if (op->exec && s_mkdir_parent(op->dst) < 0)
            return -1;
        int fd = open(op->dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                      op->own    ? 0600
                      : op->exec ? 0555
                                 : 0644);
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
void
sb_box_close_others(const int *keep, int n)
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

/* exec `file`, or each $PATH entry + "/" + file when `path` (as execvp,
 * with a stack buffer). Returns only on failure, with errno. */
static void
s_execvp(const char *file, char *const argv[], char *const envp[], bool path)
{
    if (!path || strchr(file, '/')) {
        execve(file, argv, envp);
        return;
    }
    const char *dirs = "/usr/local/bin:/usr/bin:/bin";
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            dirs = *e + 5;
    int first = ENOENT;
    char buf[4096];
    for (const char *d = dirs;; d++) {
        const char *end = strchr(d, ':');
        size_t dl = end ? (size_t)(end - d) : strlen(d);
        size_t fl = strlen(file);
        if (dl + fl + 2 < sizeof buf) {
            memcpy(buf, d, dl);
            size_t at = dl;
            if (at == 0)
                buf[at++] = '.';
            buf[at++] = '/';
            memcpy(buf + at, file, fl + 1);
            execve(buf, argv, envp);
            if (errno != ENOENT && errno != ENOTDIR)
                first = errno;
        }
        if (!end)
            break;
        d = end;
    }
    errno = first;
}

/* The program or a command: never returns. Errors go to `ep` as an
 * s_msg. A command (!x->program) is a child of pid 1 after pid 1
 * restricted itself: it inherits the Landlock domain, the seccomp filter
 * (the program's enforcing one), NO_NEW_PRIVS and an empty bounding set,
 * and applies the same steps as the program for the rest. */
__attribute__((noreturn)) void
sb_box_exec(const struct s_child *c, const struct s_exec *x, int ep,
            int landlock)
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
        int src = x->stdio[i];
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
    /* The caller's own pty (sb_sandbox_set_stdin_ctty): the program, a
     * session leader with no terminal yet, takes it. */
    if (x->ctty && ioctl(0, TIOCSCTTY, 0) < 0) {
        step = "take the terminal as controlling terminal";
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
    /* As the user: a command's pid 1 lost CAP_DAC_OVERRIDE, and the
     * user's own directories (/home/user) are 0700. */
    if (chdir(x->cwd) < 0) {
        step = "chdir";
        arg = x->cwd;
        goto fail;
    }
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
    if (x->program && landlock >= 0 && sb_landlock_enforce(landlock) < 0) {
        step = "enforce the Landlock ruleset";
        goto fail;
    }
    const sb_seccomp_prog_t *filter = x->program ? c->seccomp : NULL;
    int listener = filter ? sb_seccomp_install(filter) : 0;
    if (listener < 0) {
        step = "install the seccomp filter";
        goto fail;
    }
    if (filter && filter->audit) { /* out before anything runs */
        sb_box_send(c->ctl, MSG_LISTENER, 0, 0, 0, NULL, NULL, listener);
        close(listener);
    }
    s_execvp(x->argv[0], x->argv, x->envp, x->path);
    step = "exec";
    arg = x->argv[0];
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
__attribute__((noreturn)) void
sb_box_nest_helper(const int nsfd[2], const struct s_clone_args *ca,
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
    sb_box_send(rep, MSG_NEST_PIDFD, 0, 0, 0, NULL, NULL, self);
    step = "creating namespaces nested in the outer box (clone3)";
    int boxfd = -1;
    a = *ca;
    a.flags |= CLONE_PARENT | CLONE_PIDFD;
    a.pidfd = (uint64_t)(uintptr_t)&boxfd;
    a.exit_signal = 0; /* CLONE_PARENT: the launcher's SIGCHLD */
    long pid = syscall(SYS_clone3, &a, sizeof a);
    if (pid == 0)
        sb_box_init(c); /* never returns */
    if (pid < 0)
        goto fail;
    sb_box_send(rep, MSG_NEST_PIDFD, 0, 0, 0, NULL, NULL, boxfd);
    _exit(0);
fail:
    sb_box_send(rep, MSG_ERROR, ERR_SANDBOX, errno, 0, step, NULL, -1);
    _exit(1);
}

/* pid 1: set up the box, run the program, reap, forward. */
__attribute__((noreturn)) void
sb_box_init(const struct s_child *c)
{
    struct s_msg m;
    /* Out of the caller's session first: its terminal's Ctrl-C reaches
     * the caller, which interrupts the program itself (exactly once). */
    if (c->sigmask)
        sb_detach_child(c->sigmask);
    int keep[5] = {c->ctl, c->stdio[0], c->stdio[1], c->stdio[2], c->cmd};
    sb_box_close_others(keep, 5);
    if (sb_box_recv(c->ctl, &m, NULL) != MSG_GO)
        _exit(125);
    if (c->map_self && s_map_self() < 0)
        sb_box_die(c, "map uid and gid 1000 in the nested box", NULL);
    if (c->root_mode) {
        if (syscall(SYS_setgroups, 0, NULL) < 0)
            sb_box_die(c, "drop supplementary groups", NULL);
        if (syscall(SYS_setresgid, 0, 0, 0) < 0)
            sb_box_die(c, "setresgid 0 inside", NULL);
        if (syscall(SYS_setresuid, 0, 0, 0) < 0)
            sb_box_die(c, "setresuid 0 inside", NULL);
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        sb_box_die(c, "set the parent-death signal", NULL);
    struct pollfd pf = {.fd = c->ctl, .events = POLLIN};
    if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR)))
        _exit(125); /* the launcher died before PDEATHSIG was armed */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    if (unshare(CLONE_NEWCGROUP) < 0)
        sb_box_die(c, "new cgroup namespace", NULL);
    if (sethostname(c->hostname, strlen(c->hostname)) < 0)
        sb_box_die(c, "set the host name", NULL);
    if (!c->share_net && s_lo_up() < 0)
        sb_box_die(c, "bring up the loopback interface", NULL);

    if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
        sb_box_die(c, "make mounts private", NULL);
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
              "size=8m,mode=0755") < 0)
        sb_box_die(c, "mount the root tmpfs", NULL);
    if (chdir("/tmp") < 0 || mkdir("newroot", 0755) < 0 ||
        mount("newroot", "newroot", NULL, MS_BIND | MS_REC, NULL) < 0 ||
        mkdir("oldroot", 0755) < 0)
        sb_box_die(c, "prepare the new root", NULL);
    if (syscall(SYS_pivot_root, ".", "oldroot") < 0 || chdir("/") < 0)
        sb_box_die(c, "pivot_root to the staging root", NULL);

    for (size_t i = 0; i < c->plan->n; i++) {
        const struct s_op *op = &c->plan->ops[i];
        if (s_run_op(c, op) < 0 && !op->optional)
            sb_box_die(c, op->what, NULL);
    }

    if (umount2("/oldroot", MNT_DETACH) < 0)
        sb_box_die(c, "detach the host root", NULL);
    if (chdir("/newroot") < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
        umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
        sb_box_die(c, "pivot_root to the new root", NULL);
    if (s_remount_ro("/", MS_NOSUID | MS_NODEV) < 0)
        sb_box_die(c, "remount / read-only", NULL);
    int landlock = sb_landlock_prepare(c->landlock);
    if (landlock == -1)
        sb_box_die(c, "build the Landlock ruleset", NULL);
    if (c->egress_sock) { /* --allow-net: the one way out */
        int lfd = sb_box_egress_listen();
        if (lfd < 0)
            sb_box_die(c, "listen on the egress proxy's loopback port", NULL);
        sb_box_egress_relay(c, lfd, landlock);
        close(lfd);
    }

    sigset_t set;
    sigemptyset(&set);
    int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaddset(&set, fwd[i]);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        sb_box_die(c, "block signals", NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0)
        sb_box_die(c, "signalfd", NULL);
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        sb_box_die(c, "pipe", NULL);
    pid_t kid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (kid < 0)
        sb_box_die(c, "fork the program", NULL);
    if (kid == 0) {
        close(ep[0]);
        close(sfd);
        struct s_exec x = {.argv = c->argv,
                           .envp = c->envp,
                           .cwd = SB_WORKSPACE_PATH,
                           .stdio = c->stdio,
                           .ctty = c->ctty,
                           .program = true};
        sb_box_exec(c, &x, ep[1], landlock);
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
     * forward signals to the program, which runs as another uid, and
     * CAP_SETUID and CAP_SETGID so that the commands it starts can become
     * uid 1000 (the namespace maps no other id but 0). */
    if (sb_drop_caps_mask(1ull << CAP_KILL | 1ull << CAP_SETUID |
                          1ull << CAP_SETGID) < 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        (landlock >= 0 && sb_landlock_enforce(landlock) < 0) ||
        (c->seccomp_init && sb_seccomp_install(c->seccomp_init) < 0))
        sb_box_die(c, "restrict init", NULL);
    if (landlock >= 0)
        close(landlock);

    ssize_t n;
    while ((n = read(ep[0], &m, sizeof m)) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    if (n == (ssize_t)sizeof m) {
        m.text[sizeof m.text - 1] = '\0';
        sb_box_send(c->ctl, MSG_ERROR, m.code, m.errnum, 0, m.text, NULL, -1);
        _exit(126);
    }
    sb_box_send(c->ctl, MSG_RUNNING, 0, 0, 0, NULL, NULL, -1);

    for (;;) {
        struct pollfd fds[1 + SB_CMD_MAX + 1];
        fds[0].fd = sfd;
        fds[0].events = POLLIN;
        int nf = 1 + sb_box_cmd_fds(c, fds + 1, SB_CMD_MAX + 1);
        if (poll(fds, (nfds_t)nf, -1) <= 0)
            continue;
        sb_box_cmd_ready(c, fds + 1, nf - 1);
        if (!(fds[0].revents & POLLIN))
            continue;
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
            if (p != kid) {
                sb_box_cmd_reaped(c, p, st);
                continue;
            }
            sb_box_send(c->ctl, MSG_STATUS, 0, 0, st, NULL, NULL, -1);
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
    }
}

/* ====================================================================
 * Parent side.
 * ==================================================================== */
