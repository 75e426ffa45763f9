/*
 * kb_launcher: how a kernel process is started, signalled and reaped.
 *
 * The kernel manager knows nothing of sandboxes; it asks a launcher. Two
 * implementations: the plain launcher (a child process, for --no-sandbox)
 * and the sandbox launcher (kb_launch_sandbox.c, the default).
 *
 * Invariant for every launcher: run_dir() is a private directory (0700) on
 * the host that the kernel sees at the SAME absolute path, so a connection
 * file with ipc socket paths inside it works for both sides unchanged.
 */
#ifndef KERNEL_BRIDGE_KB_LAUNCHER_H
#define KERNEL_BRIDGE_KB_LAUNCHER_H

#include "common/err.h"
#include "common/strv.h"
#include "kernel-bridge/kb_kernelspec.h"

#include <stddef.h>

typedef struct kb_launcher kb_launcher_t;

typedef struct kb_launcher_ops {
    const char *name; /* "plain" or "sandbox" */
    /* Host path of the private run dir (borrowed). */
    const char *(*run_dir)(void *self);
    /* Where the kernel's ipc:// sockets go (borrowed); NULL: run_dir. The
     * sandbox's run dir is read-only inside, its socket dir a small
     * tmpfs. */
    const char *(*sock_dir)(void *self);
    /* Optional (NULL = nothing to do): get ready to run the kernel of
     * `spec` (its argv[0] resolved), e.g. show its runtime's files. Called
     * before every spawn. */
    int (*prepare)(void *self, const kb_kernelspec_t *spec, err_t *err);
    /* Start argv with exactly the environment envp; stdout and stderr of
     * the kernel go to out_fd. Returns 0 once the process runs. */
    int (*spawn)(void *self, char *const argv[], char *const envp[], int out_fd,
                 err_t *err);
    /* A pidfd-like fd, readable once the kernel process is gone; -1 if
     * not running. Borrowed. */
    int (*pidfd)(void *self);
    /* Deliver `sig` to the kernel (SIGINT for interrupts). */
    int (*signal)(void *self, int sig);
    /* Kill the kernel and everything it started. */
    int (*kill)(void *self);
    /* Reap the kernel if it is gone within timeout_ms: returns 1 and says
     * how it ended in `why` ("exited with status 1", "killed: out of
     * memory (limit 2 GiB)"); 0 if it is still running. */
    int (*reap)(void *self, int timeout_ms, char *why, size_t why_len);
    /* The complete environment for the kernel: the launcher's own rules
     * (which host variables may pass; never secrets) plus `extra` ("K=V",
     * later entries win). New NULL-terminated array; strv_free() it. */
    char **(*build_env)(void *self, char *const extra[]);
    /* Make a file the caller wrote into the run dir (the connection file)
     * readable by the kernel's user, and by nobody else. */
    int (*adopt_file)(void *self, const char *path, err_t *err);
    /* Release everything: kills, reaps, removes the run dir. After reap()
     * reported the kernel gone, spawn() may be called again (restart). */
    void (*destroy)(void *self);
    /* Optional (NULL = unsupported): give the running kernel to whoever
     * removes it (the serve daemon, a detached reaper) and return at once,
     * for a caller about to exit. Returns 0 when handed off (destroy()
     * then only releases what is ours), -1 when the kernel must be shut
     * down in place (e.g. its workspace is to be copied out). */
    int (*hand_off)(void *self);
    /* Optional (NULL = nothing to do): once the kernel is gone, do what
     * the end of the box promises and say whether it worked (the
     * workspace copied to --keep-workspace DIR). 0, or -1 + err
     * (ERR_IO naming what was not copied). destroy() does not repeat it. */
    int (*finish)(void *self, err_t *err);
    /* Optional (NULL = unsupported: a memory pause needs a box on the
     * gVisor engine): save the kernel's whole box, memory included, into
     * `dir` sealed by `key` (KB_PAUSE_KEY_BYTES), leaving no process; and
     * bring it back from there. As sb_sandbox_pause/resume (dir NULL:
     * only say whether it could pause now). */
    int (*pause)(void *self, const char *dir, const unsigned char *key,
                 err_t *err);
    int (*resume)(void *self, const char *dir, const unsigned char *key,
                  err_t *err);
} kb_launcher_ops_t;

#define KB_PAUSE_KEY_BYTES 32

struct kb_launcher {
    const kb_launcher_ops_t *ops;
    void *self; /* owned by the launcher; freed by ops->destroy */
};

/* Release an environment array from build_env. */

/* A plain child process in its own session, killed if we die. Its
 * environment keeps only harmless host variables (PATH, HOME, LANG, LC_*,
 * TZ, TERM, USER, LOGNAME, TMPDIR): never API keys. */
kb_launcher_t *kb_launcher_plain_new(err_t *err);
void kb_launcher_destroy(kb_launcher_t **l);

#endif
