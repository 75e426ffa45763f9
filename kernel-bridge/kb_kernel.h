/*
 * kb_kernel: the kernel manager. Starts a kernel by kernelspec through a
 * launcher, waits for it to be ready, runs executions with a wall-clock
 * limit (interrupt, grace period, then kill and restart), notices death,
 * restarts and shuts down. Or attaches to a kernel someone else started.
 *
 * Owns: the launcher, the client, the connection file in the run dir, the
 * kernel_info_reply. Single-threaded, like the client.
 */
#ifndef KERNEL_BRIDGE_KB_KERNEL_H
#define KERNEL_BRIDGE_KB_KERNEL_H

#include "common/err.h"
#include "kernel-bridge/kb_client.h"
#include "kernel-bridge/kb_kernelspec.h"
#include "kernel-bridge/kb_output.h"
#include "kernel-bridge/launch/kb_launcher.h"
#include "kernel-bridge/transport/kb_gateway.h"

#include <stdbool.h>

typedef struct kb_kernel kb_kernel_t;

/* Builds the kernel's launcher once; restarts reuse it (so a sandbox keeps
 * its /mnt/data). Returns a new launcher or NULL with err set. */
typedef kb_launcher_t *(*kb_launcher_factory_fn)(void *arg, err_t *err);

typedef struct kb_kernel_opts {
    const char *kernel_name;         /* kernelspec name; NULL = "python3" */
    kb_launcher_factory_fn launcher; /* NULL = the plain launcher */
    void *launcher_arg;              /* passed to `launcher` */
    int startup_timeout_ms;          /* 0 = 60 s */
    int interrupt_grace_ms;          /* 0 = 5 s */
    size_t max_output_bytes;         /* per execution; 0 = 64 MiB */
    char *const *extra_env;          /* "K=V" entries, borrowed, or NULL */
    char *const *extra_args;         /* appended to the kernelspec's argv, as
                                        jupyter_client's extra_arguments; borrowed,
                                        NULL-terminated, or NULL */
    /* Non-NULL: start `kernel_name` (NULL = the server's default) on this
     * Jupyter Server or Gateway instead of here (borrowed; copied). The
     * launcher, extra_env and extra_args are not used: the remote side
     * runs and isolates the kernel. Interrupt, restart and shutdown go
     * through its REST API; a kernel still running is deleted there when
     * the kb_kernel_t is destroyed or handed off. */
    const kb_gateway_opts_t *gateway;
    /* With `gateway`: right after the kernel starts, it makes a fresh
     * directory (a random name, mode 0700, with an empty out/) in its
     * temporary directory and changes into it; after a restart it changes
     * back into it (or into a new one if it is gone). All kernels of a
     * plain Jupyter Server share its root directory otherwise. The
     * directory is removed through the kernel before the kernel is
     * deleted (best effort: a kernel that no longer answers keeps it). */
    bool private_dir;
    /* Called after each successful restart (ours after a timeout, or
     * kb_kernel_restart), e.g. to set up again what the caller set up
     * after the start; its failure is logged, the restart stands. */
    int (*on_restart)(kb_kernel_t *k, void *arg, err_t *err);
    void *on_restart_arg;
} kb_kernel_opts_t;

kb_kernel_t *kb_kernel_start(const kb_kernel_opts_t *opts, err_t *err);
/* Attach to a running kernel through its connection file. There is no
 * process to watch, so death is noticed through the heartbeat. */
kb_kernel_t *kb_kernel_attach(const char *connection_file, bool allow_unsigned,
                              err_t *err);
void kb_kernel_destroy(kb_kernel_t **k);
/* kb_kernel_destroy() for a caller about to exit, without waiting for the
 * kernel to die: a kernel whose launcher can hand it off (a sandbox: to a
 * detached reaper; a serve kernel: to the server) is killed and removed
 * there; others (plain, a workspace to keep) get the graceful shutdown of
 * kb_kernel_destroy(); an attached kernel is left running. */
void kb_kernel_hand_off(kb_kernel_t **k);
/* Shut the kernel down (as kb_kernel_destroy would) and let its launcher
 * do what the box's end promises, reporting failure: the workspace copied
 * to --keep-workspace DIR. 0 (also for a kernel with nothing to do: an
 * attached or remote one), or -1 + err. Destroy or hand off after it. */
int kb_kernel_finish(kb_kernel_t *k, err_t *err);

kb_client_t *kb_kernel_client(kb_kernel_t *k); /* borrowed */
json_t *kb_kernel_info(const kb_kernel_t *k);  /* borrowed content */
const kb_kernelspec_t *
kb_kernel_spec(const kb_kernel_t *k); /* NULL if attached */
const char *kb_kernel_launcher_name(
    const kb_kernel_t *k); /* "plain", "sandbox", "attached", "gateway" */
/* For a kernel on a gateway: the server's URL (no secrets) and the
 * kernel's id there; NULL for a local kernel. Borrowed. */
const char *kb_kernel_gateway_url(const kb_kernel_t *k);
const char *kb_kernel_remote_id(const kb_kernel_t *k);
/* The private working directory of a gateway kernel started with
 * private_dir (absolute, as the kernel reports it), or NULL. Borrowed;
 * escape it before printing. */
const char *kb_kernel_workdir(const kb_kernel_t *k);
kb_launcher_t *
kb_kernel_launcher(kb_kernel_t *k); /* borrowed; NULL if attached */
/* Up to the last 4 KiB the kernel wrote to its own stdout/stderr (not
 * iopub), for start-up failures. New string, caller frees. */
char *kb_kernel_stderr_tail(kb_kernel_t *k);

/* Run `code` and fill `out`. timeout_ms <= 0 means no limit.
 * Returns 0 when the execution completed (the code may still have raised:
 * see kb_output_status). Returns -1 with:
 *   ERR_TIMEOUT  the limit passed: the kernel was interrupted; if it did not
 *                stop within the grace period it was killed and restarted
 *                (err says which; state was lost in that case; not
 *                restarted after kb_kernel_no_restart);
 *   ERR_KERNEL   the kernel died (out records why, e.g. out of memory); it
 *                is NOT restarted automatically — call kb_kernel_restart;
 *   ERR_INTERRUPTED  hooks->should_stop asked to stop: the kernel was
 *                interrupted and the rest of its outputs collected. */
int kb_kernel_execute(kb_kernel_t *k, const char *code,
                      const kb_exec_opts_t *opts, int timeout_ms,
                      kb_output_t *out, const kb_exec_hooks_t *hooks,
                      err_t *err);

/* Someone who records every execution of this kernel (the audit log,
 * agent/session/ag_audit.h): `begin` before the request goes out, its
 * return value handed to `end` after kb_kernel_execute's outcome is known
 * (rc and err as it returns them). Set once; NULL clears. Borrowed. */
typedef struct kb_exec_observer {
    void *(*begin)(void *arg, const char *code, const kb_exec_opts_t *opts);
    void (*end)(void *arg, void *token, const kb_output_t *out, int rc,
                const err_t *err);
    void *arg;
} kb_exec_observer_t;
void kb_kernel_observe(kb_kernel_t *k, const kb_exec_observer_t *obs);

/* The caller exits after its next execution (exec, run): a kernel that
 * ignores the interrupt after a timeout is killed but not restarted (the
 * error says so), so the exit is not delayed by a start nobody uses. */
void kb_kernel_no_restart(kb_kernel_t *k);

/* Set (or, with fn NULL, clear) kb_kernel_opts_t.on_restart after the
 * start: e.g. only once what it sets up again was set up the first time. */
void kb_kernel_on_restart(kb_kernel_t *k,
                          int (*fn)(kb_kernel_t *k, void *arg, err_t *err),
                          void *arg);

/* Pause with memory (kb_kernel_pause.c): close the client, then save the
 * kernel's whole box into `dir` (0700, under the caller's state dir),
 * sealed with `key` (KB_PAUSE_KEY_BYTES of the caller's secret); no
 * process is left. Needs a sandboxed kernel on the gVisor engine (else
 * ERR_USAGE saying why). A failed pause leaves the kernel dead. While
 * paused, execute refuses and alive() is false. Resume: check the seal,
 * restore the box and connect a new client (the kernel's Jupyter key is
 * the one it holds in memory; the relay's host stream is new); 0 once
 * the kernel answered kernel_info again. */
int kb_kernel_pause(kb_kernel_t *k, const char *dir, const unsigned char *key,
                    err_t *err);
int kb_kernel_resume(kb_kernel_t *k, const char *dir, const unsigned char *key,
                     err_t *err);
bool kb_kernel_paused(const kb_kernel_t *k);
int kb_kernel_interrupt(kb_kernel_t *k, err_t *err);
int kb_kernel_restart(kb_kernel_t *k, err_t *err);
bool kb_kernel_alive(kb_kernel_t *k);
/* Kill the kernel now, without a shutdown_request (for when its state is
 * thrown away anyway: a client that went away must not wait for a
 * graceful exit). Reaps it; kb_kernel_destroy then has nothing to do. */
void kb_kernel_kill(kb_kernel_t *k);
/* shutdown_request on control, wait the grace period, then kill. */
int kb_kernel_shutdown(kb_kernel_t *k, err_t *err);

#endif
