/*
 * ag_session_impl: private to agent/session/ag_session*.c: the session
 * record and the steps every start shares, made in ag_session.c (a local
 * kernel in a sandbox, cold or warm) and used by ag_session_gateway.c (a
 * kernel on a Jupyter Server or Enterprise Gateway).
 */
#ifndef AGENT_SESSION_AG_SESSION_IMPL_H
#define AGENT_SESSION_AG_SESSION_IMPL_H

#include "agent/session/ag_audit.h"
#include "agent/session/ag_session.h"
#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"
#include "packages/pk_trust.h"

#include <jansson.h>
#include <stdbool.h>

struct ag_session {
    kb_kernel_t *kernel; /* owned */
    json_t *policy;      /* owned JSON of the sandbox policy, or NULL */
    bool sandboxed;      /* false for --no-sandbox and attached kernels */
    bool attached;       /* a kernel someone else started */
    bool warm;           /* the kernel came warm from a serve pool */
    char *warnings;      /* owned, "" when none */
    char *packages_dir;  /* owned --packages DIR, or NULL */
    pk_trust_t *trust;   /* owned keys trusted for packages_dir, or NULL */
    json_t *packages;    /* owned array of install reports, or NULL */
    json_t *inputs;      /* owned array: the --file inputs with SHA-256 */
    char *kernel_name;   /* owned --kernel on a gateway, or NULL */
    bool keep_workspace; /* --keep-workspace: copied out at the end */
    ag_audit_t *audit;   /* owned; its records in the --audit log */
};

/* [{name, path, sha256, size}] for the --file list; NULL with err set. */
json_t *ag_session_inputs_new(char *const *files, err_t *err);
/* The session's "session_start" record (with the whole policy) and its
 * executions recorded from now on; nothing without --audit. */
int ag_session_audit_begin(ag_session_t *s, const ag_session_opts_t *o,
                           err_t *err);
/* The chart and table formatters when --outputs asks for them; a kernel
 * that cannot take them leaves a warning, not a failure. */
void ag_session_outputs_begin(ag_session_t *s, const ag_session_opts_t *o);
/* ag_session_start() with --gateway: the kernel on the server, the --file
 * inputs pushed through it. NULL + err. */
ag_session_t *ag_session_start_gateway(const ag_session_opts_t *o, err_t *err);

#endif
