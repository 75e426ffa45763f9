/*
 * e2b_process: envd's process.Process service (spec/envd/process/
 * process.proto in e2b-dev/E2B): Start (server stream of start, data and
 * end events), Connect, List, SendInput, StreamInput, SendSignal, Update,
 * CloseStdin, over Connect-RPC JSON (StreamInput, a client stream, in
 * e2b_process_input.c) (agent/e2b/e2b_connect.h), run in the
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

/* One StreamInput message (msg borrowed): {"start": {"process": selector}}
 * names the command (*id, 0 until then), {"data": {"input": {"stdin" or
 * "pty": base64}}} writes to it, anything else (a keepalive) is skipped.
 * Takes the sandbox's enter/leave itself. 0, or -1 + err and *code. */
int e2b_process_stream_input(e2b_sandbox_t *sb, const json_t *msg, unsigned *id,
                             const char **code, err_t *err);

/* StreamInput's request body, read as it arrives (the server's upload
 * path, like e2b_envd_upload_*): begin at the headers (never NULL; what
 * is wrong is answered at the end), data for each piece, end answers the
 * request (the stream's one response {} and its end, or the first
 * error); free releases one that never ended. The command's input is
 * written as each message completes; a message is at most
 * E2B_PROCESS_INPUT_MAX_MESSAGE bytes, the stream as long as the client
 * wants. */
#define E2B_PROCESS_INPUT_MAX_MESSAGE ((size_t)1 << 20)
typedef struct e2b_pinput e2b_pinput_t;
e2b_pinput_t *e2b_process_input_begin(e2b_req_t *r, e2b_sandbox_t *sb);
void e2b_process_input_data(e2b_pinput_t *u, const char *data, size_t len);
void e2b_process_input_end(e2b_pinput_t **u, e2b_req_t *r);
void e2b_process_input_free(e2b_pinput_t **u);

#endif
