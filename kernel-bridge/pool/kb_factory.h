/*
 * kb_factory: a preloaded forking kernel factory ("zygote").
 *
 * One Python process per factory imports ipykernel and the preload modules
 * once (with OPENBLAS/MKL/OMP/NUMEXPR threads = 1 and no thread of its
 * own: it checks /proc/self/task before every fork and refuses to fork
 * with more than one), then forks one kernel per request. Their pages of
 * pandas, numpy, matplotlib, IPython stay shared copy-on-write.
 *
 * Each forked kernel goes into its OWN sandbox, a box built by
 * sb_sandbox_spawn() exactly as for a cold kernel (namespaces, tmpfs root,
 * /mnt/data, /tmp, run dir, cgroup) whose program is only a holder
 * (`sleep infinity`). Before any user code the child, in this order:
 * joins the box's cgroup; setns() into ALL the box's namespaces (user,
 * mount, network, IPC, UTS, cgroup, pid: it forks once more so the kernel
 * is born inside the box's pid namespace); chdir /mnt/data; setsid;
 * rlimits from the policy; drops the capability bounding set,
 * supplementary groups, uid/gid to 1000, every capability, ambient caps;
 * NO_NEW_PRIVS; dups its stdio and closes every other fd; reseeds Python's
 * `random` and numpy's global generator (os.urandom and `secrets` keep no
 * state in the process, nothing to do); replaces its environment; loads
 * the SAME compiled seccomp filter as a cold sandbox (sb_seccomp_build);
 * and only then starts the kernel app (kb_warm.c's entry, with the
 * throw-away key, then rekeyed by the session as any warm kernel).
 *
 * The factory process itself runs on the host with the caller's uid,
 * NO_NEW_PRIVS, a clean environment, cwd /, stdin /dev/null and only its
 * control socket: it never runs user code, but it is not inside a box
 * (its seccomp would have to allow setns; sb_sandbox offers no such
 * profile yet). It is a child subreaper: kernels come back to it when they
 * exit and it reports their wait status.
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
/* Kill the factory (kernels already forked live on in their boxes until
 * those are destroyed). Accepts NULL; sets *f to NULL. */
void kb_factory_destroy(kb_factory_t **f);
pid_t kb_factory_pid(const kb_factory_t *f);
/* Threads the factory had when it became ready (1, or it would refuse). */
int kb_factory_threads(const kb_factory_t *f);

/* Fork a kernel into `box` (running its holder program). ctl_fd becomes
 * the kernel's fd 0 (the kb_warm control socket), out_fd its stdout and
 * stderr (both borrowed, passed on); conn_path is the connection file it
 * starts with; envp its complete environment. Returns 0 with the kernel's
 * host pid in *pid once the child applied the seccomp filter, or -1 with
 * ERR_SANDBOX naming the step that failed. */
int kb_factory_fork(kb_factory_t *f, sb_sandbox_t *box, int ctl_fd, int out_fd,
                    const char *conn_path, char *const envp[], pid_t *pid,
                    err_t *err);

/* The wait status of forked kernel `pid` once the factory reaped it:
 * returns 1 and fills *status, 0 if not (yet) known. */
int kb_factory_exit_status(kb_factory_t *f, pid_t pid, int *status);

#endif
