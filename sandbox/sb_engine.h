/*
 * sb_engine: what carries out a box's plan (sandbox/sb_sandbox_plan.c).
 *
 *   namespaces  the host kernel: clone into namespaces, mounts, seccomp,
 *               Landlock (sb_sandbox.c, sb_sandbox_child.c)
 *   gvisor      an OCI bundle run by Debian's runsc: every system call of
 *               the box is answered by gVisor's user-space kernel
 *               (sb_gvisor.c, sb_oci.c, sb_gvisor_relay.c)
 *
 * The policy names the engine (--engine, JUPYTER_AGENT_ENGINE); nothing
 * above sandbox/ knows which one runs a box except through
 * sb_sandbox_engine_info().
 */
#ifndef SANDBOX_SB_ENGINE_H
#define SANDBOX_SB_ENGINE_H

#include "common/err.h"

#include <jansson.h>

typedef enum sb_engine {
    SB_ENGINE_BAD = -1, /* JUPYTER_AGENT_ENGINE named no engine */
    SB_ENGINE_NAMESPACES = 0,
    SB_ENGINE_GVISOR = 1,
} sb_engine_t;

/* "namespaces" or "gvisor" ("?" for SB_ENGINE_BAD). */
const char *sb_engine_name(sb_engine_t e);
/* "namespaces" or "gvisor" into *out; -1 with ERR_USAGE naming both. */
int sb_engine_parse(const char *name, sb_engine_t *out, err_t *err);
/* The default: JUPYTER_AGENT_ENGINE if set (SB_ENGINE_BAD when it names
 * no engine; sb_sandbox_new then refuses), else namespaces. */
sb_engine_t sb_engine_default(void);

/* Why engine `e` cannot nest boxes (the kernel factory forks kernels
 * into boxes nested in its own: sb_sandbox_nest_in), or NULL if it can. */
const char *sb_engine_nesting_gap(sb_engine_t e);

/* What the gVisor engine would use here, for `sandbox --info`: runsc's
 * path and version, the platform (kvm when /dev/kvm is usable, else
 * ptrace: runsc 20221219 has no systrap), and what is in force. New
 * reference; never fails (fields say what is missing). */
json_t *sb_gvisor_info(void);
/* The runsc to run (new string) or NULL with ERR_SANDBOX (exit 4)
 * naming `apt-get install runsc`. */
char *sb_gvisor_find_runsc(err_t *err);
/* "kvm" or "ptrace": the platform this machine can use, or the one
 * $JUPYTER_AGENT_GVISOR_PLATFORM (kvm, ptrace) forces. */
const char *sb_gvisor_platform(void);

#endif
