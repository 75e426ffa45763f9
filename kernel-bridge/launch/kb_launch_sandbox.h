/*
 * kb_launch_sandbox: the default launcher. The kernel runs in one sandbox
 * (sandbox/sb_sandbox.h) built from a policy; restarts respawn in the same
 * box, so /mnt/data survives them. The kernel sees its run dir at the same
 * path and its workspace at /mnt/data.
 */
#ifndef KERNEL_BRIDGE_KB_LAUNCH_SANDBOX_H
#define KERNEL_BRIDGE_KB_LAUNCH_SANDBOX_H

#include "common/err.h"
#include "kernel-bridge/launch/kb_launcher.h"
#include "sandbox/sb_sandbox.h"

/* A launcher for a new sandbox under `policy` (borrowed, copied; NULL =
 * the default policy). */
kb_launcher_t *kb_launcher_sandbox_new(const sb_policy_t *policy, err_t *err);
/* Launcher operations on a box, shared by every launcher built on one
 * (this one and the warm pool's): reap with "how it ended" (1 when gone,
 * 0 when still running, as kb_launcher_ops_t.reap), and hand a run-dir file
 * to the box's user (as .adopt_file). */
int kb_sandbox_reap(sb_sandbox_t *box, int timeout_ms, char *why,
                    size_t why_len);
int kb_sandbox_adopt_file(sb_sandbox_t *box, const char *path, err_t *err);

/* 0 if the kernel program `prog` (an absolute host path) can run in the
 * box: it exists at the same path inside. Else ERR_SANDBOX naming it and
 * the --bind that would show it. */
int kb_sandbox_check_program(sb_sandbox_t *box, const char *prog, err_t *err);

/* The sandbox behind a sandbox launcher (borrowed), or NULL for any other
 * launcher. For files in and out and for warnings. */
sb_sandbox_t *kb_launcher_sandbox_box(kb_launcher_t *l);

#endif
