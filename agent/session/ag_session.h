/*
 * ag_session: one code-execution session as every subcommand needs it: the
 * policy flags they share, files copied in, a kernel started in a sandbox
 * (or, when asked loudly, without one), or attached to an existing kernel.
 */
#ifndef AGENT_SESSION_AG_SESSION_H
#define AGENT_SESSION_AG_SESSION_H

#include "common/audit.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"
#include "notebook-io/nb_record.h"
#include "packages/pk_trust.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct ag_session ag_session_t;

/* The flag groups of ag_session_flags(). */
#define AG_SESSION_NGROUPS 4

typedef struct ag_session_opts {
    const char *kernel_name; /* --kernel (borrowed: argv); NULL = python3 */
    int timeout_ms;          /* per execution; default 60 s, 0 = none */
    size_t max_output_bytes; /* per execution; default 64 MiB */
    bool no_sandbox;         /* --no-sandbox */
    char **files;            /* owned NULL-terminated "PATH[:NAME]" list */
    size_t nfiles;
    sb_policy_t policy; /* owned; the sandbox's limits and mounts */
    uint64_t given[AG_SESSION_NGROUPS]; /* flags given, a bit per row, per
                           group of ag_session_flags (policy's: policy.given) */
    int warm;           /* --warm: AG_WARM_AUTO (default), _COLD or _POOL */
    char *packages_dir; /* owned --packages DIR (signed wheels), or NULL */
    char **installs;    /* owned NULL-terminated --install NAME[==VER] list */
    size_t ninstalls;
    char **trusts; /* owned NULL-terminated --trust KEY|FILE list */
    size_t ntrusts;
    int idle_timeout_ms;      /* a long-lived session (the agent kernel's) idle
                                 this long is stopped; default 30 min, 0 = never */
    int max_lifetime_ms;      /* ... or this long after it started; default 8 h,
                                 0 = no limit */
    bool history_in_memory;   /* an ipykernel keeps IPython's history in
                                 memory, not in ~/.ipython (as nbclient and
                                 papermill start it) */
    char *gateway_url;        /* owned --gateway URL (default
                                 $JUPYTER_GATEWAY_URL), or NULL: run here */
    char *gateway_token_file; /* owned --gateway-token-file, or NULL:
                                 $JUPYTER_GATEWAY_AUTH_TOKEN */
    char *gateway_ca;         /* owned --gateway-ca PEM file, or NULL */
    bool outputs_data;        /* a Python kernel gets the chart and table
                                 formatters (ag_outputs.h); off for run and
                                 archive, whose notebooks match nbclient's */
    const char *audit_path;   /* --audit FILE (borrowed: argv), or NULL */
    const char *audit_key;    /* --audit-key KEYFILE (borrowed), or NULL */
    audit_log_t *audit;       /* a reference to the open --audit log, shared
                                 by the command's sessions (ag_session_audit_open);
                                 released with the options. A copy of the
                                 options takes its own: audit_log_ref() */
} ag_session_opts_t;

/* Where the kernel comes from (--warm). AUTO: a warm kernel from a running
 * 'jupyter-agent serve' pool when it has one for this kernel and policy,
 * else a cold start; POOL: the pool or fail; COLD: always a fresh start. */
#define AG_WARM_AUTO 0
#define AG_WARM_COLD 1
#define AG_WARM_POOL 2

void ag_session_opts_init(ag_session_opts_t *o);
void ag_session_opts_release(ag_session_opts_t *o);
/* The flag groups every session-starting command (exec, run, ask, kernel,
 * mcp) accepts, in help order: the session's own (--kernel, --timeout,
 * --file, --max-output, --warm, --idle-timeout, --max-lifetime,
 * --no-sandbox), the sandbox policy
 * (sb_policy_flags), the packages (--packages, --install, --trust) and
 * the remote kernels (--gateway, --gateway-token-file, --gateway-ca).
 * Their targets are `o` and `&o->policy`; see common/cliopt.h. */
void ag_session_flags(ag_session_opts_t *o,
                      cliopt_group_t groups[AG_SESSION_NGROUPS]);
/* One of those flags outside getopt ("--packages", "DIR" or
 * "--memory=1G", NULL); the same return as sb_policy_parse_flag(). */
int ag_session_parse_flag(ag_session_opts_t *o, const char *flag,
                          const char *value, err_t *err);

/* Open o->audit_path into o->audit (once; nothing without --audit): the
 * command's one log, before any session starts. 0, or -1 + err. */
int ag_session_audit_open(ag_session_opts_t *o, err_t *err);

ag_session_t *ag_session_start(const ag_session_opts_t *o, err_t *err);
/* A hint naming the box limit that `text` (a start-up failure, a cell's
 * error) shows was hit, e.g. --pids for "can't start new thread"; NULL
 * when none. Borrowed: valid until the next call on this thread. A failed
 * ag_session_start() already carries it. */
const char *ag_session_limit_hint(const char *text, const sb_policy_t *policy);
ag_session_t *ag_session_attach(const char *connection_file,
                                bool allow_unsigned, err_t *err);
void ag_session_destroy(ag_session_t **s);
/* ag_session_destroy() at the end of a command that exits right after
 * (exec, run, ask): the kernel is not waited for; its box goes to whoever
 * removes it (kb_kernel_hand_off). Not for long-running processes: a cold
 * box's pid 1 stays their zombie until they exit. */
void ag_session_hand_off(ag_session_t **s);
/* ag_session_hand_off(), saying whether the end did what was asked: with
 * --keep-workspace DIR the kernel is shut down and the workspace copied,
 * and a failed copy is -1 + err (ERR_IO, naming DIR and what was not
 * copied). Without it, the same as ag_session_hand_off() and 0. */
int ag_session_end(ag_session_t **s, err_t *err);

kb_kernel_t *ag_session_kernel(ag_session_t *s); /* borrowed */
/* Record the session's kernel (kernelspec, language_info) in a notebook
 * being recorded (notebook-io/nb_record.h). */
void ag_session_record_kernel(ag_session_t *s, nb_record_t *rec);
/* Warnings the user must see once (no sandbox, limits not enforced). */
void ag_session_print_warnings(ag_session_t *s, FILE *f);
/* The same text (lines ending in newlines; "" when none). Borrowed. */
const char *ag_session_warnings(ag_session_t *s);
/* Host path of the workspace (/mnt/data inside), or NULL if none. */
const char *ag_session_workspace(ag_session_t *s);
/* The files the session was given (--file), as notebook metadata records
 * them for report archives: [{"name", "path" (absolute, on the host),
 * "sha256", "size"}], hashed when the session started. New reference. */
json_t *ag_session_inputs_json(ag_session_t *s);
/* The sandbox policy as JSON for notebook metadata (new reference); for a
 * kernel on a gateway {"sandboxed": false, "gateway": {"url", "kernel_id"}}
 * (the URL without any secret). */
json_t *ag_session_policy_json(ag_session_t *s);
/* True when the kernel came warm from a 'jupyter-agent serve' pool (its
 * sandbox then belongs to the server: ag_session_sandbox() is NULL, the
 * workspace is reached through ag_session_workspace()). */
bool ag_session_is_warm(ag_session_t *s);
/* The sandbox, or NULL (--no-sandbox, attached). Borrowed. */
sb_sandbox_t *ag_session_sandbox(ag_session_t *s);
/* Commands in the kernel's box (sandbox/sb_cmds.h): a new engine on the
 * box of this process or, for a warm kernel, the one serve passed with
 * it; NULL + err (ERR_SANDBOX) for --no-sandbox, a gateway or an
 * attached kernel. */
struct sb_proc_engine *ag_session_proc_engine(ag_session_t *s, err_t *err);

/* Replace the --allow-net rules of the session's box for its next
 * connections (sb_sandbox_set_net_rules; the same errors), for the
 * servers' operator doors. ERR_USAGE for a session without a box of this
 * process (a warm kernel's belongs to serve). Safe from any thread while
 * the session lives. */
int ag_session_set_net_rules(ag_session_t *s, const char *rules, err_t *err);
/* A door's rules as --allow-net takes them: a JSON string as it is, or a
 * list of strings (none empty or holding a comma) joined by commas (new
 * string); NULL for anything else. Not checked further. */
char *ag_net_rules_join(const json_t *v);

/* The session's --audit log and its id there (common/audit.h: e.g. for
 * audit_connection), NULL for a session without one. Borrowed. */
audit_log_t *ag_session_audit(ag_session_t *s);
const char *ag_session_audit_id(ag_session_t *s);
/* A "file_in" / "file_out" record for a file the session moved (`dir`
 * "in" or "out", `via` how: "upload", "download", ...), hashed from
 * `path` on the host, or given (sha256 non-NULL). 0 without a log. */
int ag_session_audit_file(ag_session_t *s, const char *dir, const char *via,
                          const char *name, const char *path, uint64_t size,
                          const char *sha256, err_t *err);

/* Let the session's --audit log record each command a sandbox/sb_cmds.h
 * manager made with `lim` runs in the box (destroy the manager before
 * the session). Nothing without a log. */
/* ag_session_audit_file for the file open as `fd` (hashed with pread). */
int ag_session_audit_fd(ag_session_t *s, const char *dir, const char *via,
                        const char *name, int fd, err_t *err);
/* Let the --audit log record each file a copy-out with `oo` puts on the
 * host ("file_out", sandbox/sb_files.h on_file). Nothing without a log. */
void ag_session_audit_out_opts(ag_session_t *s, sb_files_out_opts_t *oo);
struct sb_cmds_limits;
void ag_session_audit_cmds(ag_session_t *s, struct sb_cmds_limits *lim);

/* --packages DIR and the keys trusted for it (from --trust and the default
 * trusted-keys directories), or NULL when the session has none. Borrowed.
 * ag_session_start installs --install names from them once the kernel is
 * ready (packages/pk_install.h); a refusal fails the start. */
const char *ag_session_packages_dir(ag_session_t *s);
const pk_trust_t *ag_session_trust(ag_session_t *s);
/* Append an install report (borrowed; a reference is kept) to the
 * session's record, shown under "packages" in ag_session_policy_json. */
void ag_session_record_packages(ag_session_t *s, json_t *report);

/* A --file argument: PATH, or PATH:NAME when PATH alone does not exist (a
 * colon inside an existing path stays). *name defaults to PATH's last
 * component. Both new strings. */
void ag_session_split_file_arg(const char *arg, char **path, char **name);

/* "60", "1.5", "2m" -> milliseconds. */
int ag_parse_seconds(const char *s, int *ms, err_t *err);

#endif
