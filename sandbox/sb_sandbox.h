/*
 * sb_sandbox: run one program in a box and hand back a process handle.
 *
 * The box: new user, pid, network (loopback only), mount, IPC, UTS and
 * cgroup namespaces; a read-only root built on tmpfs with /usr and a few
 * /etc entries bound read-only; fresh /proc (hidepid) and minimal /dev;
 * size-limited tmpfs at /tmp, $HOME, /dev/shm and /mnt/data (the
 * workspace); the run dir bound read-only at the same absolute path as on
 * the host; cgroup limits; uid 1000 with no capabilities, NO_NEW_PRIVS,
 * rlimits, Landlock (sb_landlock.h) and the seccomp filter of
 * sb_seccomp.h applied last.
 *
 * Processes: the box's pid 1 is a small init (our own code continuing
 * after clone, as in bubblewrap) that reaps zombies, forwards SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the program, reports
 * the program's wait status to us and exits; the kernel then kills
 * whatever is left in the pid namespace. pid 1 gets SIGKILL when the
 * thread that called sb_sandbox_spawn() dies (PR_SET_PDEATHSIG), so call
 * it from a thread that lives as long as the sandbox (e.g. the main one).
 *
 * Lifecycle: sb_sandbox_new() prepares (run dir, cgroup), files go in with
 * sb_sandbox_add_file(), sb_sandbox_spawn() starts the program,
 * sb_sandbox_wait() reaps it (spawn again to restart, keeping /mnt/data),
 * sb_sandbox_destroy() cleans everything.
 * Not thread-safe: one thread drives one sandbox. The library never
 * prints; sb_sandbox_warnings() has what the caller should show.
 */
#ifndef SANDBOX_SB_SANDBOX_H
#define SANDBOX_SB_SANDBOX_H

#include "common/err.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_policy.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct sb_sandbox sb_sandbox_t;

typedef enum sb_exit_kind {
    SB_EXITED = 1,     /* the program exited; see code */
    SB_SIGNALED = 2,   /* the program (or the whole box) was killed by signal */
    SB_OOM_KILLED = 3, /* killed by the out-of-memory killer (signal = 9) */
} sb_exit_kind_t;

typedef struct sb_exit {
    sb_exit_kind_t kind; /* how it ended */
    int code;            /* exit status when SB_EXITED */
    int signal;          /* the signal when SB_SIGNALED or SB_OOM_KILLED */
    bool box_killed;     /* the box's init itself was killed (sb_sandbox_kill,
                            launcher death) before reporting */
    bool pids_limit;     /* gVisor: the sandbox hit the host pids cgroup
                            (--pids + gVisor's own threads) and the Sentry
                            died with every task (SB_SIGNALED, 9) */
} sb_exit_t;

/* Host-side preparation; nothing runs yet. The policy is copied. */
sb_sandbox_t *sb_sandbox_new(const sb_policy_t *p, err_t *err);
/* Kill, reap, keep the workspace if the policy says so (errors are
 * dropped; call sb_sandbox_finish() first to see them), remove the cgroup
 * and the run dir. Accepts NULL; sets *p to NULL. */
void sb_sandbox_destroy(sb_sandbox_t **p);
/* Like sb_sandbox_destroy() without waiting: kill the box and leave the
 * rest (waiting for its processes to die, removing the cgroup and the run
 * dir) to a detached reaper process, then free the object. For a launcher
 * about to exit: the box's pid 1 stays its zombie until it does. A box
 * not running, or whose workspace is to be kept, is destroyed in place. */
void sb_sandbox_hand_off(sb_sandbox_t **p);

/* The policy in force (borrowed). */
const sb_policy_t *sb_sandbox_policy(const sb_sandbox_t *sb);
/* Host path of the private run dir (mode 0700, owned by the sandbox
 * user). INVARIANT: the same absolute path inside is this directory,
 * bind-mounted read-only (files the host hands the box: a connection
 * file, wheels). Sockets go to sb_sandbox_sock_dir().
 * Short enough for unix socket names (< 60 bytes). Read-only inside:
 * the box cannot write host storage through it. Borrowed. */
const char *sb_sandbox_run_dir(const sb_sandbox_t *sb);
/* The socket dir: the one place inside where the box may create files
 * besides its own tmpfs mounts (/tmp, $HOME, /dev/shm, /mnt/data); put
 * ipc:// sockets here (e.g. the connection file's "ip" prefix). Inside,
 * a tmpfs of SB_SOCK_DIR_BYTES and SB_SOCK_DIR_INODES, mode 0700, owned
 * by the box's user; on the host, the same path is a symlink to it
 * (through /proc/<pid>/fd of this process), valid once spawn returned,
 * for any process of the same user. Short (< 60 bytes). Borrowed. */
const char *sb_sandbox_sock_dir(const sb_sandbox_t *sb);
#define SB_SOCK_DIR_BYTES (4u << 20)
#define SB_SOCK_DIR_INODES 256
/* Copy host file `host_path` (regular, at most SB_SOCK_DIR_BYTES / 4) to
 * <sock dir>/NAME, mode 0600, owned by the box's user, in every box
 * spawned from now on, as it reads at that spawn: a file the program must
 * be able to rewrite (ipykernel rewrites its connection file) or a cache
 * in a directory it must be able to write. A NAME given again replaces
 * the earlier file. */
int sb_sandbox_add_box_file(sb_sandbox_t *sb, const char *host_path,
                            const char *name, err_t *err);
/* Host uid and gid the sandboxed program runs as (uid 1000 inside). Files
 * the caller puts in the run dir for the program (a connection file) must
 * be readable by it: chown them to these or make them 0644. */
uid_t sb_sandbox_host_uid(const sb_sandbox_t *sb);
gid_t sb_sandbox_host_gid(const sb_sandbox_t *sb);

/* The workspace (/mnt/data inside) is a tmpfs that exists only once the
 * box runs; the host reaches it through a directory fd our process holds
 * (it stays valid after the box dies, until destroy). After spawn:
 * sb_sandbox_workspace() is "/proc/self/fd/N" (valid in this process
 * only) and sb_sandbox_workspace_fd() is N; before spawn NULL / -1.
 * Prefer sb_sandbox_read_file()/copy_out()/list_files(), which never
 * follow links the sandboxed code could plant. */
const char *sb_sandbox_workspace(const sb_sandbox_t *sb);
int sb_sandbox_workspace_fd(const sb_sandbox_t *sb);

/* Queue host file `host_path` to be copied to /mnt/data/NAME at spawn
 * (NAME defaults to its base name). Refuses names with '/', a leading
 * '.', control characters; non-regular files; files bigger than the
 * workspace. Not while a box runs; copied at the next spawn. */
int sb_sandbox_add_file(sb_sandbox_t *sb, const char *host_path,
                        const char *name_or_null, err_t *err);
/* The program's stdin (default: /dev/null inside). Before spawn. The fd
 * is borrowed (dup'ed into the box at spawn). */
void sb_sandbox_set_stdin(sb_sandbox_t *sb, int fd);
/* The stdin set above is a terminal of the caller's own (a pty it relays,
 * never the user's terminal): the program takes it as its controlling
 * terminal, before its seccomp filter, so ^C typed into it interrupts the
 * program. Before spawn. */
void sb_sandbox_set_stdin_ctty(sb_sandbox_t *sb, bool on);

/* Nesting, for the kernel factory (kernel-bridge/pool/kb_factory.h):
 * create this box's namespaces inside those of `outer` (a running box):
 * its user namespace a child of outer's and owned by outer's program user,
 * its pid namespace a child of outer's. Outer's program, uid 1000 with no
 * capability, may then setns() into this box (the owner of a user
 * namespace may; nothing else of the outer box is shared), and everything
 * in this box ends when outer's pid namespace ends. Inside, only uid and
 * gid 1000 are mapped (to outer's 1000: the same host ids as a box of a
 * root launcher), as in a box started without root. NULL undoes it. Set
 * before spawn; `outer` is borrowed and must run while this box spawns. */
void sb_sandbox_nest_in(sb_sandbox_t *sb, const sb_sandbox_t *outer);
/* The program's seccomp filter lets setns() through (everything else in
 * sb_seccomp.h stays denied): the kernel factory's box needs it to enter
 * the boxes nested in it. Before spawn. */
void sb_sandbox_allow_setns(sb_sandbox_t *sb);

/* Host pid of the box's program (the child of its init), or -1 when none
 * runs. Unlike init, the program may be dumpable: its /proc/PID/ns files
 * are the box's namespaces, open to its owner. */
pid_t sb_sandbox_program_pid(const sb_sandbox_t *sb);
/* The pid, in our pid namespace, of the process a pidfd refers to (from
 * /proc/self/fdinfo: also for pidfds made in another pid namespace and
 * passed to us), or -1. */
pid_t sb_pidfd_pid(int pidfd);

/* Start `argv` (argv[0] an absolute path inside the box) with exactly
 * `envp` (build it with sb_policy_build_env(); never pass environ).
 * stdout_fd/stderr_fd are borrowed; -1 means /dev/null (the gVisor engine
 * keeps dups of them until destroy, for a restore: a reader of a pipe sees
 * EOF only then, so wait for the box rather than for EOF). Returns 0 once
 * the program has been exec'ed, or -1 with ERR_SANDBOX and the step that
 * failed ("sandbox: mount /usr read-only: Permission denied"), or ERR_USAGE
 * when argv[0] cannot be executed.
 * May be called again once the box has ended (sb_sandbox_wait() returned
 * 0), e.g. to restart a kernel: a fresh box starts with the same run dir,
 * cgroup and policy, and /mnt/data holds a copy of the old workspace's
 * regular files and directories (symlinks, FIFOs, sockets are dropped). */
int sb_sandbox_spawn(sb_sandbox_t *sb, char *const argv[], char *const envp[],
                     int stdout_fd, int stderr_fd, err_t *err);

/* The signals a terminal sends to its foreground process group (Ctrl-C,
 * Ctrl-\, Ctrl-Z) and the hang-up, which `kill -SIG -PGID` sends the same
 * way. A box or a kernel must not get them from the caller's group: the
 * caller interrupts it itself, once (a kernel that got one Ctrl-C twice
 * can be interrupted again while it reports the first, and then never
 * answers). Around a fork or clone: sb_detach_block() blocks them in the
 * calling thread (the old mask into *old), the parent then calls
 * sb_detach_restore(old), and the child sb_detach_child(old) first: it
 * leaves the caller's session (setsid), discards what reached it from the
 * old group meanwhile and restores the mask. sb_detach_child() is
 * async-signal-safe and works in a copy of a multi-threaded process. */
void sb_detach_block(sigset_t *old);
void sb_detach_restore(const sigset_t *old);
void sb_detach_child(const sigset_t *old);

/* Host pid of the box's pid 1, and a pidfd that polls readable when it
 * exits (-1 before spawn). */
pid_t sb_sandbox_pid(const sb_sandbox_t *sb);
int sb_sandbox_pidfd(const sb_sandbox_t *sb);
/* Deliver `sig` to the program (via init). SIGKILL kills the whole box.
 * Returns 0 or -1 with errno. */
int sb_sandbox_signal(sb_sandbox_t *sb, int sig);
/* Kill everything in the box (init via pidfd, then the cgroup). */
int sb_sandbox_kill(sb_sandbox_t *sb);
/* ---- pause with memory (the gVisor engine; sandbox/sb_gvisor_ckpt.c) ----
 * Pause: the box's relay lets go of its one host stream, `runsc
 * checkpoint` saves every process of the box into `image_dir` (made 0700
 * if missing; it must be an empty dir of ours), and the image is sealed
 * with an HMAC-SHA256 by `key` (the caller's secret: only whoever holds
 * it can resume). Afterwards no process of the box is left (its cgroup
 * is empty); /mnt/data stays mounted, held by an fd. Every connection to
 * the box's sockets was closed: reconnect after resume. Resume: refused
 * (ERR_VERIFY) unless `image_dir` is ours (euid, 0700, plain files) and
 * its seal matches `key` and this box; then `runsc restore`. On the
 * namespaces engine both answer ERR_USAGE (nothing can save a process
 * the host kernel runs). A failed pause leaves the box ended. */
#define SB_SEAL_KEY_BYTES 32
int sb_sandbox_pause(sb_sandbox_t *sb, const char *image_dir,
                     const unsigned char key[SB_SEAL_KEY_BYTES], err_t *err);
int sb_sandbox_resume(sb_sandbox_t *sb, const char *image_dir,
                      const unsigned char key[SB_SEAL_KEY_BYTES], err_t *err);
bool sb_sandbox_paused(const sb_sandbox_t *sb);

/* Wait up to timeout_ms (< 0: forever) for the box to end and reap it.
 * Returns 0 with *out filled, 1 if it is still running, -1 on error
 * (errno). After the first success it returns the same result again. */
int sb_sandbox_wait(sb_sandbox_t *sb, int timeout_ms, sb_exit_t *out);
/* Kill, reap, and copy the workspace to policy.keep_workspace_dir if set.
 * Returns the copy's error, else 0. Idempotent. */
int sb_sandbox_finish(sb_sandbox_t *sb, err_t *err);

/* "exited with status 1", "killed by signal 9 (SIGKILL)",
 * "killed: out of memory (limit 2 GiB)". Returns buf. */
const char *sb_exit_describe(const sb_exit_t *e, const sb_policy_t *p,
                             char *buf, size_t size);
/* Shell-style status: code when exited, 128 + signal otherwise. */
int sb_exit_status(const sb_exit_t *e);

/* Commands in the running box (sandbox/sb_proc.h, sandbox/sb_cmds.h):
 * the box's pid 1 forks each as a child that takes the program's steps
 * from setsid on (sb_box_exec: rlimits, uid 1000, no capability; it
 * inherits pid 1's Landlock domain, seccomp filter and NO_NEW_PRIVS), in
 * the box's namespaces and cgroup. A new engine on this box's current
 * incarnation (it holds a copy of the command socket; a respawned box
 * needs a new one), or NULL with ERR_SANDBOX when the box is not
 * running. */
struct sb_proc_engine;
struct sb_proc_engine *sb_sandbox_proc_engine(sb_sandbox_t *sb, err_t *err);
/* The command socket itself (borrowed; -1 when not running), for a
 * process that hands the box's commands to another (serve passes a copy
 * with each kernel it gives out); sb_proc_engine_on_fd() there. */
int sb_sandbox_cmd_socket(const sb_sandbox_t *sb);
/* The namespace engine on a command socket `fd` (stolen) from
 * sb_sandbox_cmd_socket() of another process. */
struct sb_proc_engine *sb_proc_engine_on_fd(int fd);

/* Create the directory /mnt/data/NAME (a plain name, no '/') in a running
 * box, owned by the box's user. An existing one is fine. */
int sb_sandbox_mkdir(sb_sandbox_t *sb, const char *name, err_t *err);

/* Copy open input file `in` (sb_files_open_input_at; named `shown`) to
 * /mnt/data/NAME in a running box, created fresh and owned by the box's
 * user, at most the workspace's size (--disk). 0, or -1 + err. */
int sb_sandbox_copy_in_fd(sb_sandbox_t *sb, int in, const char *shown,
                          const char *name, err_t *err);

/* Files out of /mnt/data (see sandbox/sb_files.h for the rules). */
int sb_sandbox_read_file(sb_sandbox_t *sb, const char *relpath,
                         size_t max_bytes, char **data, size_t *len,
                         err_t *err);
int sb_sandbox_copy_out(sb_sandbox_t *sb, const char *rel_dir,
                        const char *host_dest_dir, const sb_files_out_opts_t *o,
                        size_t *n_copied, err_t *err);
/* True if the host file `host_path` (resolved through symlinks) is at the
 * same path inside the box: under /usr, /bin, /lib..., an /etc file the box
 * binds, the run dir, or a --bind whose inside path is its host path. */
bool sb_sandbox_shows_host_path(const sb_sandbox_t *sb, const char *host_path);

/* Show host path `host` read-only at the same path inside from the next
 * spawn on (it joins the box's policy, so the notebook's record names
 * it). As sb_policy_add_bind for errors. */
int sb_sandbox_add_bind(sb_sandbox_t *sb, const char *host, err_t *err);

/* Regular files in /mnt/data: JSON [{"path","size"}] (new reference). */
json_t *sb_sandbox_list_files(sb_sandbox_t *sb, size_t max_entries);

/* --allow-net while the box runs (docs/egress.md): `rules` (a comma list
 * as --allow-net takes, checked by the same parser; "" for none) replace
 * the rules of the box's proxy for every connection accepted after this
 * returns (those open keep theirs), and of the boxes a restart spawns.
 * For the launcher only: the channel is a socket whose one end this
 * process holds and the box never sees. Safe from any thread. 0, or -1
 * with ERR_USAGE (a bad rule, a box started without --allow-net) or
 * ERR_SANDBOX (the proxy has ended). */
int sb_sandbox_set_net_rules(sb_sandbox_t *sb, const char *rules, err_t *err);
/* The rules in force: a new string, or NULL without --allow-net. */
char *sb_sandbox_net_rules(sb_sandbox_t *sb);
/* 0 if `rules` would do for sb_sandbox_set_net_rules (the --allow-net
 * parser; "" is none), or -1 with ERR_USAGE naming what is wrong. */
int sb_net_rules_check(const char *rules, err_t *err);

/* With the policy's seccomp_audit: "seccomp audit: the allow list lacks
 * sysfs (#139, 1 call)" or "... every system call was on the allow list"
 * (so far; calls are counted while the box runs). NULL without audit.
 * New string. */
char *sb_sandbox_seccomp_audit_report(sb_sandbox_t *sb);

/* TEST ONLY: weakenings that let the security tests show that each
 * layer holds by itself (Landlock with a writable host bind or a shared
 * network namespace; the namespaces without Landlock). The library
 * references sb_unsafe_test_knobs weakly: it exists only in a program
 * that defines it, as tests/security/test_sb_attacks.c and
 * bench/startup.c do; the release
 * binary does not, so nothing can turn these on there. */
typedef struct sb_unsafe_test_knobs {
    const char *rw_bind_host;   /* bind this host directory read-write... */
    const char *rw_bind_inside; /* ...at this path inside */
    bool share_netns;           /* stay in the launcher's network namespace */
    bool no_landlock;           /* do not apply Landlock */
    bool no_seccomp;            /* no seccomp filter (benchmarks) */
    bool seccomp_deny_only;     /* only the deny rows: the filter before
                                   the allow list (benchmarks) */
} sb_unsafe_test_knobs_t;
extern sb_unsafe_test_knobs_t sb_unsafe_test_knobs;

/* The engine the policy names (sb_engine.h) and what it enforces on this
 * machine: for gvisor, runsc's path, version and platform (or why it is
 * missing). New reference. */
json_t *sb_sandbox_engine_info(const sb_policy_t *p);

/* What is not enforced ("cgroups unavailable: ..."), or NULL. Borrowed. */
const char *sb_sandbox_warnings(const sb_sandbox_t *sb);
/* The box's CPU weight against other boxes (sb_cgroup_set_cpu_weight; cgroup v2
 * only): 1..10000, 100 = an ordinary task's (the default). 0 or -1. */
int sb_sandbox_set_cpu_weight(sb_sandbox_t *sb, unsigned weight);
/* The cgroup directory for "memory", "pids" or "cpu", or NULL. */
const char *sb_sandbox_cgroup_dir(const sb_sandbox_t *sb,
                                  const char *controller);

#endif
