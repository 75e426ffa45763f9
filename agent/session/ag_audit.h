/*
 * ag_audit: a session's records in the --audit log (common/audit.h,
 * docs/audit.md): its start with the whole policy, each execution (code
 * hash and text; status and outputs), files in and out, package installs,
 * and its end. The log is opened once per command from the flags
 * (ag_audit_open) and shared by all the sessions of a server.
 */
#ifndef AGENT_SESSION_AG_AUDIT_H
#define AGENT_SESSION_AG_AUDIT_H

#include "common/audit.h"
#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"
#include "sandbox/sb_cmds.h"

#include <jansson.h>
#include <stdint.h>

typedef struct ag_audit ag_audit_t;

/* Open --audit FILE, sealed with --audit-key KEYFILE (an `archive keygen`
 * secret key; NULL: no seal). NULL + err on failure. */
audit_log_t *ag_audit_open(const char *path, const char *key_path, err_t *err);

/* One session's records in `log` (a reference is taken; NULL: a session
 * without a log, every call a no-op). */
ag_audit_t *ag_audit_new(audit_log_t *log);
void ag_audit_destroy(ag_audit_t **a);
const char *ag_audit_id(const ag_audit_t *a); /* NULL without a log */
audit_log_t *ag_audit_log(const ag_audit_t *a);

/* The "session_start" record: `start` (an object, stolen) holds the
 * policy, kernel, files; "file_in" records for each of `inputs` (the
 * [{name, path, sha256, size}] of ag_session_inputs_json, borrowed). */
int ag_audit_start(ag_audit_t *a, json_t *start, const json_t *inputs,
                   err_t *err);
/* Records each execution of k from now on (kb_kernel_observe). */
void ag_audit_watch(ag_audit_t *a, kb_kernel_t *k);
/* Records each command a sandbox/sb_cmds.h manager made with `lim`
 * starts in the box ("command", "command_end"): the MCP shell tool, the
 * E2B process API. `a` must outlive the manager. */
void ag_audit_cmds(ag_audit_t *a, sb_cmds_limits_t *lim);
/* A "packages" record: an install report (borrowed). */
int ag_audit_packages(ag_audit_t *a, const json_t *report, err_t *err);
/* A "file_in" or "file_out" record (`dir` "in" or "out"): how it moved
 * (`via`: "--file", "upload", "download", "--keep-workspace", ...), its
 * name, host path (NULL: none) and hash. */
int ag_audit_file(ag_audit_t *a, const char *dir, const char *via,
                  const char *name, const char *path, uint64_t size,
                  const char *sha256, err_t *err);
/* ag_audit_file for the file open as `fd`, hashed from its start (its
 * offset is left alone). */
int ag_audit_file_fd(ag_audit_t *a, const char *dir, const char *via,
                     const char *name, const char *path, int fd, err_t *err);
/* A sandbox/sb_files.h sb_files_out_fn for an ag_audit_t (arg): a
 * "file_out" record (via "copy-out") for each file a copy-out put on the
 * host, hashed there. */
void ag_audit_file_out(void *arg, const char *dir, const char *rel, int dirfd,
                       const char *name);

/* A sandbox/sb_policy.h net_record_fn for an ag_audit_t (arg): each
 * connection the --allow-net proxy recorded (its --net-log object, read
 * as hostile: members of the wrong type are left out) becomes a "net"
 * record. From the sandbox's record thread. Nothing without a log. */
void ag_audit_net(void *arg, const json_t *rec);

/* The "session_end" record (status: "ok", or what failed), sealed when
 * the log has a key. */
int ag_audit_end(ag_audit_t *a, const char *status, err_t *err);

#endif
