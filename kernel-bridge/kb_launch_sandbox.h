/*
 * kb_launch_sandbox: the default launcher. The kernel runs in one sandbox
 * (sandbox/sb_sandbox.h) built from a policy; restarts respawn in the same
 * box, so /mnt/data survives them. The kernel sees its run dir at the same
 * path and its workspace at /mnt/data.
 */
#ifndef KERNEL_BRIDGE_KB_LAUNCH_SANDBOX_H
#define KERNEL_BRIDGE_KB_LAUNCH_SANDBOX_H

#include "common/err.h"
#include "kernel-bridge/kb_launcher.h"
#include "sandbox/sb_sandbox.h"

/* A launcher for a new sandbox under `policy` (borrowed, copied; NULL =
 * the default policy). */
kb_launcher_t *kb_launcher_sandbox_new(const sb_policy_t *policy, err_t *err);
/* The sandbox behind a sandbox launcher (borrowed), or NULL for any other
 * launcher. For files in and out and for warnings. */
sb_sandbox_t *kb_launcher_sandbox_box(kb_launcher_t *l);

#endif
