/*
 * sb_sandbox_impl: private to sandbox/sb_sandbox*.c. The box's state and
 * the data the parent prepares for the child, shared by
 *   sb_sandbox.c        the host side: new, spawn, wait, destroy, files
 *   sb_sandbox_child.c  pid 1 and the program, from clone to exec
 *   sb_sandbox_plan.c   the mount plan the child carries out
 * The child-side code runs between clone and exec in a copy of a possibly
 * multi-threaded process: it must not allocate, lock or use stdio (see
 * sb_sandbox.c's header comment).
 */
#ifndef SANDBOX_SB_SANDBOX_IMPL_H
#define SANDBOX_SB_SANDBOX_IMPL_H

#include "common/buf.h"
#include "sandbox/sb_cgroup.h"
#include "sandbox/sb_landlock.h"
#include "sandbox/sb_sandbox.h"
#include "sandbox/sb_seccomp.h"

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/types.h>

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

/* ---- commands: the launcher's command socket and pid 1 ----
 * (SOCK_SEQPACKET; sb_sandbox_cmd.c is pid 1's side, sb_sandbox_proc.c
 * the launcher's). A start request is a header followed by `len` bytes
 * of NUL-terminated strings: the cwd, argc argv entries, envc envp
 * entries; the command's stdin, stdout and stderr come with it as three
 * SCM_RIGHTS fds. Pid 1 answers each start with CMD_STARTED (the pid
 * inside) or CMD_FAILED, later CMD_EXITED with the wait status. */

#define SB_CMD_MAX 64        /* commands alive at once in one box */
#define SB_CMD_REQ_MAX 65536 /* bytes of one start request */
#define SB_CMD_STRS_MAX 4096 /* argv + envp entries of one request */
#define SB_CMD_F_CTTY 1u     /* stdin is a terminal: make it the ctty */
#define SB_CMD_F_PATH 2u     /* argv[0] is looked up in $PATH */

enum s_cmd_type {
    CMD_START = 1,   /* launcher: start a command */
    CMD_SIGNAL = 2,  /* launcher: signal command `id`'s process group */
    CMD_STARTED = 3, /* pid 1: command `id` runs as `pid` */
    CMD_FAILED = 4,  /* pid 1: command `id` did not start (text, errnum) */
    CMD_EXITED = 5   /* pid 1: command `id` ended with wait `status` */
};

struct s_cmd_req {
    uint32_t type;       /* CMD_START or CMD_SIGNAL */
    uint32_t id;         /* the launcher's name for the command */
    int32_t sig;         /* CMD_SIGNAL: the signal */
    uint32_t flags;      /* CMD_START: SB_CMD_F_* */
    uint32_t argc, envc; /* CMD_START: string counts (argc >= 1) */
    uint32_t len;        /* CMD_START: bytes of strings after the header */
};

struct s_cmd_ev {
    uint32_t type;  /* CMD_STARTED, CMD_FAILED or CMD_EXITED */
    uint32_t id;    /* the request's id */
    int32_t pid;    /* CMD_STARTED: pid inside the box */
    int32_t status; /* CMD_EXITED: wait status */
    int32_t errnum; /* CMD_FAILED: errno of the failed step */
    int32_t code;   /* CMD_FAILED: ERR_SANDBOX or ERR_USAGE */
    char text[256]; /* CMD_FAILED: the step, NUL-terminated */
};

/* A process the box starts as its user: the program or a command. */
struct s_exec {
    char *const *argv; /* argv[0]: a path, or a name with `path` */
    char *const *envp; /* its complete environment */
    const char *cwd;   /* absolute, inside */
    const int *stdio;  /* fds for 0, 1, 2 (or -1: /dev/null) */
    bool ctty;         /* stdio[0] becomes its controlling terminal */
    bool path;         /* look argv[0] up in envp's PATH */
    bool program;      /* the program: set its own filter and Landlock */
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
    bool exec;           /* OP_WRITE: mode 0555 (a script on PATH) */
    char *what;          /* owned: the step, for error messages */
};

struct s_plan {
    struct s_op *ops; /* owned array */
    size_t n;         /* entries used */
};

/* Everything pid 1 and the program need, prepared by the parent. */
struct s_child {
    int ctl;                   /* our end of the control socket */
    int cmd;                   /* our end of the command socket, or -1 */
    int stdio[3];              /* fds for the program's 0, 1, 2 (or -1) */
    bool ctty;                 /* stdio[0] becomes its controlling tty */
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
    const sigset_t *sigmask; /* the launcher's mask before sb_detach_block() */
    /* --allow-net: the proxy's Unix socket inside (sb_sandbox_egress.c),
     * or NULL: no relay, no port */
    const char *egress_sock;
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
    bool stdin_ctty;            /* stdin_fd: the program's controlling tty */
    pid_t pid;                  /* host pid of pid 1, or -1 */
    int pidfd;                  /* owned, or -1 */
    int ctl;                    /* owned control socket, or -1 */
    int cmd;                    /* owned command socket, or -1 */
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
    /* owned: the gVisor engine's state (sb_gvisor.c), or NULL for the
     * namespaces engine */
    struct sb_gv *gv;
    pid_t egress_pid; /* --allow-net's proxy process (its group), or -1 */
    int egress_life;  /* owned: the pipe end whose close ends it, or -1 */
    /* --allow-net's channels to the proxy (sb_sandbox_egress_ctl.c):
     * the rules socket (the launcher's end; the box never holds it) and
     * the thread that turns the proxy's records into --net-log lines and
     * net_record_fn calls. All under egress_mu, which set_net_rules takes
     * from any thread. */
    pthread_mutex_t egress_mu;
    int egress_rules; /* owned: rules socket, or -1 */
    char *net_rules;  /* owned: the rules set on the running session
                         (sb_sandbox_set_net_rules), or NULL: the
                         policy's; a restarted box keeps them */
    struct sb_egress_rx *egress_rx; /* owned: the record reader, or NULL */
    /* owned: --net-secret's session CA and leaves (sb_egress_ca.h), made
     * at the first spawn and kept for the box's life, or NULL */
    struct sb_egress_ca *egress_ca;
};

/* Test-only weakenings (sb_sandbox.h): referenced weakly, so only a
 * program that defines the symbol (a test) can turn them on. */
extern sb_unsafe_test_knobs_t sb_unsafe_test_knobs __attribute__((weak));

/* sb_sandbox_child.c */
const sb_unsafe_test_knobs_t *sb_box_knobs(void);
void sb_box_send(int fd, int type, int code, int errnum, int status,
                 const char *text, const char *arg, int pass_fd);
int sb_box_recv(int fd, struct s_msg *m, int *passed_fd);
__attribute__((noreturn)) void sb_box_die(const struct s_child *c,
                                          const char *step, const char *arg);
__attribute__((noreturn)) void sb_box_init(const struct s_child *c);
__attribute__((noreturn)) void sb_box_nest_helper(const int nsfd[2],
                                                  const struct s_clone_args *ca,
                                                  const struct s_child *c,
                                                  int rep);
void sb_box_close_others(const int *keep, int n);
/* Become the box's user under the program's confinement and exec `x`;
 * errors go to `ep` as an s_msg. Runs in a fresh child of pid 1. */
__attribute__((noreturn)) void sb_box_exec(const struct s_child *c,
                                           const struct s_exec *x, int ep,
                                           int landlock);

/* sb_sandbox_cmd.c: pid 1's side of the command socket. After the
 * program runs, pid 1 polls the fds sb_box_cmd_fds() fills (the command
 * socket, starts in flight) with its signalfd, passes what they report
 * to sb_box_cmd_ready() and every child it reaps to sb_box_cmd_reaped(). */
int sb_box_cmd_fds(const struct s_child *c, struct pollfd *pf, int max);
void sb_box_cmd_ready(const struct s_child *c, const struct pollfd *pf, int n);
void sb_box_cmd_reaped(const struct s_child *c, pid_t pid, int status);

/* sb_sandbox.c: a spawn starts by forgetting the last box (its fds, exit,
 * OOM count) and returns the old workspace fd (or -1) to carry over;
 * it ends, whatever rc, by closing or keeping that old workspace and
 * dropping the staged files once they are in (rc 0). */
int sb_box_spawn_begin(sb_sandbox_t *sb);
void sb_box_spawn_end(sb_sandbox_t *sb, int rc, int old_ws);
/* sb_sandbox.c: the workspace fd `passed` from a new box: carry `old_ws`
 * over (if >= 0) and copy the queued files in. 0 or -1. */
int sb_box_take_workspace(sb_sandbox_t *sb, int passed, int old_ws, err_t *err);
/* sb_sandbox_exit.c: reap pid 1 (waiting when `block`) and fill sb->exit
 * with what the exit means. 1 when reaped, 0 when it still runs, -1. */
int sb_box_reap(sb_sandbox_t *sb, bool block);

/* ---- the engine (sb_gvisor.c), called by sb_sandbox.c ---- */
int sb_gv_prepare(sb_sandbox_t *sb, err_t *err); /* at new() */
int sb_gv_spawn(sb_sandbox_t *sb, char *const argv[], char *const envp[],
                int stdout_fd, int stderr_fd, err_t *err);
int sb_gv_signal(sb_sandbox_t *sb, int sig);
/* The wait status the relay reported, or -1 (then runsc's own). */
int sb_gv_status(const sb_sandbox_t *sb);
void sb_gv_release(sb_sandbox_t *sb); /* at destroy */

/* sb_sandbox_egress.c: --allow-net. Launcher: start the session's proxy
 * once the socket dir is linked (a no-op without --allow-net), stop it
 * when the box ends. Box (pid 1, before Landlock): the loopback listener
 * (fd or -1 with errno), then the relay process that serves it. */
int sb_box_egress_start(sb_sandbox_t *sb, err_t *err);
void sb_box_egress_stop(sb_sandbox_t *sb);
/* sb_sandbox_egress_ctl.c: the launcher's channels to a starting proxy.
 * open: the rules socketpair (fds[0] ours, fds[1] the proxy's fd 6) and,
 * with --net-log or net_record_fn, the record pipe (fds[2] the reader's,
 * fds[3] the proxy's fd 5; else -1). 0 or -1 + err; on failure nothing is
 * left open. started: the proxy holds its ends (closed here); our ends
 * go to sb and the reader thread starts. stop: after the proxy died. */
int sb_box_egress_ctl_open(sb_sandbox_t *sb, int fds[4], err_t *err);
int sb_box_egress_ctl_started(sb_sandbox_t *sb, int fds[4], err_t *err);
void sb_box_egress_ctl_stop(sb_sandbox_t *sb);
/* The rules the proxy starts with: those set on the session, else the
 * policy's. Borrowed, under egress_mu's owner (the driving thread). */
const char *sb_box_egress_rules_now(sb_sandbox_t *sb);
int sb_box_egress_listen(void);
void sb_box_egress_relay(const struct s_child *c, int lfd, int landlock);

/* sb_sandbox_egress_tls.c: --net-secret and --net-ca, launcher side.
 * Before each spawn: the session CA and its leaves (once; a no-op without
 * --net-secret). The box's CA bundle (new buffer; NULL when the box needs
 * none). The proxy's configuration as a sealed memfd (the secret files
 * read now), into *fd, or -1 without --net-secret. Free the CA at the
 * end. */
int sb_box_egress_ca(sb_sandbox_t *sb, err_t *err);
char *sb_box_egress_bundle(const sb_sandbox_t *sb, size_t *len);
int sb_box_egress_conf_fd(sb_sandbox_t *sb, int *fd, err_t *err);
void sb_box_egress_ca_free(sb_sandbox_t *sb);

/* sb_sandbox_plan.c */
void sb_box_plan_build(const sb_sandbox_t *sb, struct s_plan *pl);
void sb_box_plan_release(struct s_plan *pl);

#endif
