/*
 * e2b_process: envd's process.Process service (spec/envd/process/
 * process.proto in e2b-dev/E2B): Start (server stream of start, data and
 * end events), Connect, List, SendInput, StreamInput, SendSignal, Update,
 * CloseStdin, over Connect-RPC JSON (agent/e2b/e2b_connect.h), run in the
 * sandbox's own box.
 */
#ifndef AGENT_E2B_E2B_PROCESS_H
#define AGENT_E2B_E2B_PROCESS_H

#include "agent/e2b/e2b_http.h"
#include "agent/e2b/e2b_sandbox.h"

/* Answer `r`, a POST /process.Process/METHOD for sandbox `sb` (the caller
 * checked its access token and holds its entry). `method` is "Start",
 * "List" ... (borrowed). */
void e2b_process_handle(e2b_req_t *r, e2b_sandbox_t *sb, const char *method);

#endif
