/*
 * kb_factory: a preloaded forking kernel factory ("zygote").
 *
 * One Python process per factory imports ipykernel and the preload modules
 * once (with OPENBLAS/MKL/OMP/NUMEXPR threads = 1 and no thread of its
 * own: it checks /proc/self/task before every fork and refuses to fork
 * with more than one), then forks one kernel per request. Their pages of
 * pandas, numpy, matplotlib, IPython stay shared copy-on-write.
 *
 * The factory runs in a box of its own (sb_sandbox.h, default policy with
 * raised rlimit ceilings): uid 1000 of its own user namespace (a non-root
 * host uid), no capability, NO_NEW_PRIVS, a clean environment, the
 * sandbox's seccomp filter except that setns() is allowed, its control
 * socket as stdin and nothing of the host's files. Nothing of ours that
 * touches Python runs on the host.
 *
 * Each forked kernel goes into its OWN sandbox, a box built by
 * sb_sandbox_spawn() exactly as for a cold kernel (namespaces, tmpfs root,
 * /mnt/data, /tmp, run dir, cgroup) whose program is only a holder
 * (`sleep infinity`), and which is NESTED in the factory's box
 * (sb_sandbox_nest_in): its user namespace is a child of the factory's and
 * owned by the factory's uid, its pid namespace a child of the factory's.
 * That ownership is the only thing that lets the unprivileged factory
 * enter it. Before any user code the child, in this order: joins the
 * box's cgroups (by writing "0" into cgroup.procs fds the host opened);
 * setns() into ALL the box's namespaces (namespace files the host opened;
 * user first, then mount, network, IPC, UTS, pid, cgroup: it forks once
 * more so the kernel is born inside the box's pid namespace); chdir
 * /mnt/data; setsid; rlimits from the policy; drops the capability
 * bounding set, supplementary groups, uid/gid to 1000, every capability,
 * ambient caps; NO_NEW_PRIVS; dups its stdio and closes every other fd;
 * reseeds Python's `random` and numpy's global generator (os.urandom and
 * `secrets` keep no state in the process, nothing to do); replaces its
 * environment; loads the SAME compiled seccomp filter as a cold sandbox
 * (sb_seccomp_build, stacked on the factory's); and only then starts the
 * kernel app (kb_warm_entry.py, with the throw-away key, then rekeyed by
 * the session as any warm kernel).
 *
 * The factory is a child subreaper: kernels come back to it when they
 * exit and it reports their wait status (the host maps the pids its box
 * sees to host pids through a pidfd sent with each fork's answer).
 * Because kernel boxes nest in the factory's pid namespace, destroying the
 * factory ends every kernel forked from it (a restarted kernel is a cold
 * one in a box of its own and is not affected).
 *
 * Not thread-safe; one owner drives it (a pool, the serve loop).
 */
#ifndef KERNEL_BRIDGE_POOL_KB_FACTORY_H
#define KERNEL_BRIDGE_POOL_KB_FACTORY_H

#include "common/err.h"
#include "sandbox/sb_sandbox.h"

#include <stdbool.h>
#include <sys/types.h>

typedef struct kb_factory kb_factory_t;

typedef struct kb_factory_opts {
    const char *python;  /* interpreter; NULL = /usr/bin/python3 */
    const char *preload; /* imported once in the factory, or NULL */
    int timeout_ms;      /* for the factory's own start; 0 = 120 s */
} kb_factory_opts_t;

/* Start the factory and wait until it imported everything. */
kb_factory_t *kb_factory_new(const kb_factory_opts_t *o, err_t *err);
/* Kill the factory and its box, which ends the kernels forked from it
 * (their boxes nest in its pid namespace; destroy them first). Accepts
 * NULL; sets *f to NULL. */
void kb_factory_destroy(kb_factory_t **f);
/* Host pid of the factory box's pid 1 (the factory is its program). */
pid_t kb_factory_pid(const kb_factory_t *f);
/* The factory's own box (borrowed): kernel boxes nest in it
 * (sb_sandbox_nest_in) so that the factory may enter them. */
sb_sandbox_t *kb_factory_box(kb_factory_t *f);
/* Threads the factory had when it became ready (1, or it would refuse). */
int kb_factory_threads(const kb_factory_t *f);

/* Fork a kernel into `box` (running its holder program). ctl_fd becomes
 * the kernel's fd 0 (the kb_warm control socket), out_fd its stdout and
 * stderr (both borrowed, passed on); conn_path is the connection file it
 * starts with; envp its complete environment. Does not wait: returns 0
 * once the request is sent, with *ticket naming it for
 * kb_factory_fork_result (the factory answers as soon as it knows the
 * kernel's pid; the kernel then sets itself up, and one whose set-up
 * fails exits before running anything), or -1 with ERR_SANDBOX. */
int kb_factory_fork_send(kb_factory_t *f, sb_sandbox_t *box, int ctl_fd,
                         int out_fd, const char *conn_path, char *const envp[],
                         unsigned long *ticket, err_t *err);
/* The answer to fork request `ticket`, without waiting: 1 with the
 * kernel's host pid in *pid, 0 while it has not come, -1 + ERR_SANDBOX
 * when the fork failed. Each answer is collected once. */
int kb_factory_fork_result(kb_factory_t *f, unsigned long ticket, pid_t *pid,
                           err_t *err);
/* Nobody will collect `ticket`'s answer (its warm-up was dropped). */
void kb_factory_fork_forget(kb_factory_t *f, unsigned long ticket);
/* Readable when the factory said something (an answer, an exit). */
int kb_factory_ctl_fd(const kb_factory_t *f);

/* Give forked kernel `pid` (host pid) and its threads nice 0 again: warm
 * kernels inherit the factory's nice value (FACTORY_NICE, set only when
 * this process may undo it), so warm-ups yield the CPU to sessions in use;
 * a kernel handed to a session must not. No-op otherwise. */
void kb_factory_foreground(const kb_factory_t *f, pid_t pid);

/* The wait status of forked kernel `pid` once the factory reaped it:
 * returns 1 and fills *status, 0 if not (yet) known. */
int kb_factory_exit_status(kb_factory_t *f, pid_t pid, int *status);

#endif
