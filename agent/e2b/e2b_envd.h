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

#endif
