/*
 * e2b_interp: the code interpreter E2B's template runs on port 49999
 * (e2b-dev/code-interpreter, template/server), over the sandbox's kernel:
 *   POST   /execute               {code, context_id, language, env_vars}:
 *                                 one JSON object per line (see
 *                                 docs/e2b.md): number_of_executions,
 *                                 stdout, stderr, result, error,
 *                                 keepalive (every 5 s), end_of_execution
 *   GET    /contexts, POST /contexts, DELETE /contexts/{id},
 *   POST   /contexts/{id}/restart
 *   GET    /health
 */
#ifndef AGENT_E2B_E2B_INTERP_H
#define AGENT_E2B_E2B_INTERP_H

#include "agent/e2b/e2b_http.h"
#include "agent/e2b/e2b_sandbox.h"

/* The largest /execute body (bytes). */
#define E2B_INTERP_MAX_BODY ((size_t)16 << 20)

void e2b_interp_handle(e2b_req_t *r, e2b_sandbox_t *sb);

#endif
