/*
 * kb_launch_sandbox: the default launcher. Each kernel start gets a fresh
 * sandbox (sandbox/sb_sandbox.h) built from a policy; the kernel sees its
 * run dir at the same path and its workspace at /mnt/data.
 */
#ifndef KERNEL_BRIDGE_KB_LAUNCH_SANDBOX_H
#define KERNEL_BRIDGE_KB_LAUNCH_SANDBOX_H

#include "common/err.h"
#include "kernel-bridge/kb_launcher.h"

struct sb_policy;

/* A launcher that runs the kernel in a new sandbox under `policy`
 * (borrowed, copied; NULL = the default policy). */
kb_launcher_t *kb_launcher_sandbox_new(const struct sb_policy *policy,
                                       err_t *err);

#endif
