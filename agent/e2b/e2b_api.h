/*
 * e2b_api: E2B's control plane (spec/openapi.yml in e2b-dev/E2B) for the
 * sandboxes of one owner (the caller checked the API key):
 *   POST   /sandboxes, /v2/sandboxes        create (201)
 *   GET    /sandboxes, /v2/sandboxes        list the running ones
 *   GET    /sandboxes/{id}                  one
 *   DELETE /sandboxes/{id}                  kill at once (204)
 *   POST   /sandboxes/{id}/timeout          a new end: now + timeout s (204)
 *   POST   /sandboxes/{id}/connect, /v2/sandboxes/{id}/connect
 *                                           a running one's tokens (200)
 * What another issue brings (pause, resume, fork, snapshots, network
 * rules, metrics, templates, volumes) answers 501 naming what is missing.
 */
#ifndef AGENT_E2B_E2B_API_H
#define AGENT_E2B_E2B_API_H

#include "agent/e2b/e2b_http.h"
#include "agent/e2b/e2b_sandbox.h"

/* Template id -> kernelspec name, or NULL when the template is unknown:
 * "code-interpreter-v1", "code-interpreter", "base" -> "python3". */
const char *e2b_api_kernel_for(const char *template_id);

void e2b_api_handle(e2b_req_t *r, const e2b_config_t *cfg, const char *owner);

#endif
