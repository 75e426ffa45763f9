/*
 * kb_warm: one pre-started ipykernel in its own sandbox, waiting for the
 * session that will own it, and the launcher that hands it over.
 *
 * Warm-up (kb_warm_start): a fresh sandbox (sb_sandbox.h) runs a small
 * Python entry point (kb_warm_entry.py) that imports ipykernel, starts
 * IPKernelApp on run_dir/kernel.json with a throw-away key, runs the
 * optional preload code in a private namespace (so `import pandas` later
 * costs nothing, while the user namespace stays empty), and reports
 * {"ready": true} on its control socket (the box's fd 0, a SEQPACKET
 * socketpair). kb_warm_poll() notices that without blocking.
 *
 * Hand-over (kb_warm_launcher): the warm kernel becomes a kb_launcher_t for
 * kb_kernel_start(). The kernel manager writes a connection file with a
 * FRESH key at the same path and the same ipc socket names (kb_conn's
 * fixed "kernel-1..5" layout); the launcher's first spawn() does not start
 * a process but sends {"op": "rekey"} on the control socket: the kernel
 * re-reads that file, checks that transport, ip and ports are its own,
 * switches its HMAC key, applies the environment, answers {"ok": true},
 * closes its end of the control socket (fd 0 becomes /dev/null) and never
 * reads it again. Only then does user code arrive. The warm-up key is
 * dead from that moment. Restarts (a second spawn()) start a cold kernel
 * in the same box, keeping /mnt/data.
 *
 * Differences from a cold kernel, by design: the kernel's own stdout and
 * stderr (not iopub) went to the warm-up memfd, so kb_kernel_stderr_tail()
 * of a pooled kernel is empty; environment variables are applied with
 * os.environ.update() at hand-over, after the interpreter started.
 *
 * Only kernelspecs that run ipykernel ([PYTHON, "-m", "ipykernel_launcher",
 * "-f", "{connection_file}"]) can be warmed; kb_warm_start() refuses others
 * with ERR_USAGE.
 */
#ifndef KERNEL_BRIDGE_POOL_KB_WARM_H
#define KERNEL_BRIDGE_POOL_KB_WARM_H

#include "common/err.h"
#include "kernel-bridge/launch/kb_launcher.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct kb_warm kb_warm_t;

typedef struct kb_warm_opts {
    const char *kernel_name;   /* kernelspec; NULL = "python3" */
    const sb_policy_t *policy; /* borrowed, copied; NULL = default policy */
    const char *preload;       /* Python run once at warm-up, or NULL */
} kb_warm_opts_t;

typedef enum kb_warm_state {
    KB_WARM_STARTING = 1, /* the box runs; the kernel is not ready yet */
    KB_WARM_READY = 2,    /* answering; waiting for its session */
    KB_WARM_FAILED = 3,   /* died or reported an error: see kb_warm_error */
} kb_warm_state_t;

/* Create the sandbox and start warming. Returns quickly (the box is set
 * up, the imports run in the background) or NULL with err set. */
kb_warm_t *kb_warm_start(const kb_warm_opts_t *o, err_t *err);
/* The same, but the kernel is forked from `factory` (kb_factory.h;
 * borrowed, must outlive the result) into a fresh box whose own program
 * is only a holder and which nests in the factory's box
 * (sb_sandbox_nest_in): shared pages, same sandbox. The launcher then signals
 * and watches the kernel process itself; a restart replaces the holder by
 * a cold kernel in the same box. o->preload is ignored (the factory has
 * its own). */
kb_warm_t *kb_warm_fork(kb_factory_t *factory, const kb_warm_opts_t *o,
                        err_t *err);
/* Kill the box and free everything. Accepts NULL; sets *w to NULL. */
void kb_warm_destroy(kb_warm_t **w);

/* Advance: read the control socket and watch the process for up to
 * timeout_ms (0 = do not wait). Returns the state after that. */
kb_warm_state_t kb_warm_poll(kb_warm_t *w, int timeout_ms);
kb_warm_state_t kb_warm_state(const kb_warm_t *w);
/* Why it failed ("" otherwise); borrowed. */
const char *kb_warm_error(const kb_warm_t *w);
/* fds that become readable when kb_warm_poll() has news: the control
 * socket and the box's pidfd (either may be -1). */
int kb_warm_ctl_fd(const kb_warm_t *w);
int kb_warm_pidfd(const kb_warm_t *w);
/* Host pid of a forked kernel (kb_warm_fork), else -1. */
pid_t kb_warm_kernel_pid(const kb_warm_t *w);
/* Milliseconds since kb_warm_start/kb_warm_fork was called. */
int64_t kb_warm_age_ms(const kb_warm_t *w);
/* How long the warm-up took, from that call until kb_warm_poll() saw the
 * kernel ready; -1 while it is not ready. */
int64_t kb_warm_warmup_ms(const kb_warm_t *w);

/* Turn a READY warm kernel into a launcher for kb_kernel_start() (it takes
 * ownership: *w becomes NULL). NULL with ERR_KERNEL if it is not ready. */
kb_launcher_t *kb_warm_launcher(kb_warm_t **w, err_t *err);
/* The sandbox behind a launcher made by kb_warm_launcher (borrowed), or
 * NULL for any other launcher. */
sb_sandbox_t *kb_launcher_warm_box(kb_launcher_t *l);
/* Host pid of the forked kernel behind such a launcher, else -1. */
pid_t kb_launcher_warm_kernel_pid(kb_launcher_t *l);
/* True once the launcher's kernel was handed over (first spawn done). */
bool kb_launcher_warm_handed_over(kb_launcher_t *l);

/* Does kernelspec argv look like ipykernel (see above)? */
bool kb_warm_argv_is_ipykernel(char *const argv[]);

#endif
