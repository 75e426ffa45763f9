/*
 * e2b_envd: envd's HTTP side and its filesystem.Filesystem service on
 * port 49983, over the sandbox's workspace (/home/user = /mnt/data):
 *   GET  /health                   204
 *   GET  /files?path=P             download a file
 *   POST /files?path=P             upload (multipart/form-data, or the
 *                                  raw bytes as application/octet-stream)
 *   POST /filesystem.Filesystem/{Stat, ListDir, MakeDir, Move, Remove,
 *        WatchDir, ...}            Connect-RPC JSON (e2b_connect.h)
 * Files cross with sandbox/sb_files.h's rules: no symlink followed on
 * the way, regular files only, names checked, the disk cap.
 */
#ifndef AGENT_E2B_E2B_ENVD_H
#define AGENT_E2B_E2B_ENVD_H

#include "agent/e2b/e2b_http.h"
#include "agent/e2b/e2b_sandbox.h"

void e2b_envd_handle(e2b_req_t *r, e2b_sandbox_t *sb);

/* POST /files, streamed: begun once the headers are in (r has no body
 * yet; the caller checked the token), fed the body as it arrives, ended
 * (answered) when it is complete, or freed when the client went away.
 * Each file is written to a temporary name and renamed into place when
 * its part is complete; at most the disk size per file. */
typedef struct e2b_upload e2b_upload_t;
e2b_upload_t *e2b_envd_upload_begin(e2b_req_t *r, e2b_sandbox_t *sb);
void e2b_envd_upload_data(e2b_upload_t *u, const char *data, size_t len);
void e2b_envd_upload_end(e2b_upload_t **u, e2b_req_t *r);
void e2b_envd_upload_free(e2b_upload_t **u);

#endif
