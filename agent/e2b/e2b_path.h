/*
 * e2b_path: envd's view of the sandbox's files: E2B paths as
 * workspace-relative ones, and workspace entries as EntryInfo messages.
 */
#ifndef AGENT_E2B_E2B_PATH_H
#define AGENT_E2B_E2B_PATH_H

#include "common/err.h"
#include "sandbox/sb_files_ws.h"

#include <jansson.h>

/* An E2B path (absolute under /home/user or /mnt/data, or relative to
 * /home/user) as a workspace-relative path (new string; "" = the top), or
 * NULL + err. */
char *e2b_path_rel(const char *path, err_t *err);
/* A workspace-relative path as the absolute one the box sees (new). */
char *e2b_path_abs(const char *rel);
/* A workspace entry as envd's EntryInfo message (new reference). */
json_t *e2b_path_entry_json(const sb_ws_entry_t *e);

#endif
