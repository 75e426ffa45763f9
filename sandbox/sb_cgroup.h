/*
 * sb_cgroup: the control group that holds one sandbox's processes.
 *
 * cgroup v2 when /sys/fs/cgroup is the unified hierarchy and our cgroup
 * can delegate memory and pids: as root /sys/fs/cgroup/jupyter-agent/<id>;
 * in a delegated subtree D (systemd's Delegate=yes) D/jupyter-agent/<id>,
 * after moving the launcher and its children into D/jupyter-agent-launcher
 * (a cgroup holding processes cannot enable controllers); the shared
 * jupyter-agent parent gets cpu.weight 100 per live box. Else cgroup v1:
 * /sys/fs/cgroup/<ctl>/<our cgroup>/jupyter-agent/<id> for the memory and
 * pids hierarchies, and /sys/fs/cgroup/cpu/<our cgroup>/jupyter-agent-<id>
 * beside our own processes with the default weight. Either way a busy box
 * gets the CPU share of one ordinary process. Else nothing: the object
 * still exists, enforces nothing, and sb_cgroup_warning() says what is not
 * enforced (rlimits remain).
 *
 * Ownership: sb_cgroup_new() returns the only reference;
 * sb_cgroup_destroy() kills what is left inside and removes the
 * directories it created.
 */
#ifndef SANDBOX_SB_CGROUP_H
#define SANDBOX_SB_CGROUP_H

#include "common/err.h"
#include "sandbox/sb_policy.h"

#include <stdbool.h>
#include <sys/types.h>

typedef struct sb_cgroup sb_cgroup_t;

/* Create and configure the cgroup for sandbox `id` (short, [a-zA-Z0-9]).
 * Never NULL: when cgroups cannot be used the object enforces nothing and
 * carries a warning. */
sb_cgroup_t *sb_cgroup_new(const sb_policy_t *p, const char *id);
void sb_cgroup_destroy(sb_cgroup_t **cg);
/* Free the object but leave its directories: another process (the
 * sandbox's reaper) removes them. Accepts NULL; sets *cg to NULL. */
void sb_cgroup_forget(sb_cgroup_t **cg);

/* Move `pid` in. Returns 0 or -1 with ERR_SANDBOX. A no-op without cgroups. */
int sb_cgroup_enter(sb_cgroup_t *cg, pid_t pid, err_t *err);
/* SIGKILL every process inside (cgroup.kill on v2, cgroup.procs on v1). */
void sb_cgroup_kill(sb_cgroup_t *cg);
/* The box's CPU weight against its sibling boxes (cpu.weight; v2 only, as
 * a v1 box's cpu group competes with the whole machine): 1..10000, 100 =
 * an ordinary task's. Returns 0, or -1 (v1, no cpu controller); best
 * effort. */
int sb_cgroup_set_cpu_weight(sb_cgroup_t *cg, unsigned weight);
/* How many processes the kernel's OOM killer killed inside; 0 if unknown. */
long sb_cgroup_oom_kills(const sb_cgroup_t *cg);
/* Times the pids controller refused a fork (pids.events "max"). */
long sb_cgroup_pids_max_hits(const sb_cgroup_t *cg);

bool sb_cgroup_limits_memory(const sb_cgroup_t *cg);
bool sb_cgroup_limits_cpu(const sb_cgroup_t *cg);
/* The directory for controller "memory", "pids" or "cpu" (v2: the one
 * directory), or NULL. Borrowed. */
const char *sb_cgroup_dir(const sb_cgroup_t *cg, const char *controller);
/* What is not enforced, or NULL when everything is. Borrowed. */
const char *sb_cgroup_warning(const sb_cgroup_t *cg);

#endif
