/*
 * ag_session: one code-execution session as every subcommand needs it: the
 * policy flags they share, files copied in, a kernel started in a sandbox
 * (or, when asked loudly, without one), or attached to an existing kernel.
 */
#ifndef AGENT_SESSION_AG_SESSION_H
#define AGENT_SESSION_AG_SESSION_H

#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"
#include "packages/pk_trust.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct ag_session ag_session_t;

typedef struct ag_session_opts {
    const char *kernel_name; /* NULL = python3 */
    int timeout_ms;          /* per execution; default 60 s, 0 = none */
    size_t max_output_bytes; /* per execution; default 64 MiB */
    bool no_sandbox;         /* --no-sandbox */
    char **files;            /* owned NULL-terminated "PATH[:NAME]" list */
    size_t nfiles;
    sb_policy_t policy; /* owned; the sandbox's limits and mounts */
    int warm;           /* --warm: AG_WARM_AUTO (default), _COLD or _POOL */
    char *packages_dir; /* owned --packages DIR (signed wheels), or NULL */
    char **installs;    /* owned NULL-terminated --install NAME[==VER] list */
    size_t ninstalls;
    char **trusts; /* owned NULL-terminated --trust KEY|FILE list */
    size_t ntrusts;
    int idle_timeout_ms; /* a long-lived session (the agent kernel's) idle
                            this long is stopped; default 30 min, 0 = never */
    int max_lifetime_ms; /* ... or this long after it started; default 8 h,
                            0 = no limit */
} ag_session_opts_t;

/* Where the kernel comes from (--warm). AUTO: a warm kernel from a running
 * 'jupyter-agent serve' pool when it has one for this kernel and policy,
 * else a cold start; POOL: the pool or fail; COLD: always a fresh start. */
#define AG_WARM_AUTO 0
#define AG_WARM_COLD 1
#define AG_WARM_POOL 2

/* Long options every session-starting subcommand accepts; their `val`s
 * are >= AG_SESSION_OPT_BASE, so they never clash with short options. */
#define AG_SESSION_OPT_BASE 0x1000
#define AG_SESSION_LONGOPTS                                                    \
    {"no-sandbox", no_argument, 0, AG_SESSION_OPT_BASE + 0},                   \
        {"file", required_argument, 0, AG_SESSION_OPT_BASE + 1},               \
        {"warm", required_argument, 0, AG_SESSION_OPT_BASE + 20},              \
        {"memory", required_argument, 0, AG_SESSION_OPT_BASE + 2},             \
        {"cpus", required_argument, 0, AG_SESSION_OPT_BASE + 3},               \
        {"pids", required_argument, 0, AG_SESSION_OPT_BASE + 4},               \
        {"disk", required_argument, 0, AG_SESSION_OPT_BASE + 5},               \
        {"tmp", required_argument, 0, AG_SESSION_OPT_BASE + 6},                \
        {"keep-workspace", required_argument, 0, AG_SESSION_OPT_BASE + 7},     \
        {"force", no_argument, 0, AG_SESSION_OPT_BASE + 21},                   \
        {"keep-exec", no_argument, 0, AG_SESSION_OPT_BASE + 22},               \
        {"packages", required_argument, 0, AG_SESSION_OPT_BASE + 8},           \
        {"install", required_argument, 0, AG_SESSION_OPT_BASE + 9},            \
        {"trust", required_argument, 0, AG_SESSION_OPT_BASE + 10},             \
        {"idle-timeout", required_argument, 0, AG_SESSION_OPT_BASE + 11},      \
    {                                                                          \
        "max-lifetime", required_argument, 0, AG_SESSION_OPT_BASE + 12         \
    }

#define AG_SESSION_FLAGS_HELP                                                  \
    "\nsandbox (every kernel runs sandboxed unless --no-sandbox):\n"           \
    "      --file PATH[:NAME] copy a file into /mnt/data before start\n"       \
    "      --memory SIZE      memory limit, no swap (default 2G)\n"            \
    "      --cpus N           CPU quota in cores (default 1)\n"                \
    "      --pids N           process/thread limit (default 128)\n"            \
    "      --disk SIZE        size of /mnt/data (default 512M)\n"              \
    "      --tmp SIZE         size of /tmp (default 256M)\n"                   \
    "      --keep-workspace DIR  copy /mnt/data to DIR (new or empty) at the " \
    "end;\n"                                                                   \
    "                         never dot-files, links or exec bits; caps:\n"    \
    "                         --disk bytes, 10000 entries, 16 levels\n"        \
    "      --force            files out may go into an existing non-empty\n"   \
    "                         directory (never overwriting a file there)\n"    \
    "      --keep-exec        files out keep the exec bit set in the box\n"    \
    "      --warm MODE        auto: a warm kernel from 'jupyter-agent "        \
    "serve'\n"                                                                 \
    "                         when one runs, else a cold start (default);\n"   \
    "                         pool: the server's or fail; cold: always "       \
    "fresh\n"                                                                  \
    "      --idle-timeout S   stop a long-lived session (the agent "           \
    "kernel's)\n"                                                              \
    "                         after S idle seconds (default 1800; 0 = "        \
    "never)\n"                                                                 \
    "      --max-lifetime S   ... or S seconds after it started (default\n"    \
    "                         28800; 0 = no limit)\n"                          \
    "      --no-sandbox       run the kernel as a plain process: NO "          \
    "isolation\n"                                                              \
    "\npackages (there is no network; only wheels from a signed directory):\n" \
    "      --packages DIR     wheels signed with 'jupyter-agent manifest "     \
    "sign'\n"                                                                  \
    "      --install NAME[==VER]  install NAME and its dependencies from "     \
    "DIR\n"                                                                    \
    "                         before any code runs (repeatable)\n"             \
    "      --trust KEY|FILE   trust this public key for DIR (repeatable), "    \
    "besides\n"                                                                \
    "                         the *.pub files in $JUPYTER_AGENT_TRUSTED_KEYS " \
    "or\n"                                                                     \
    "                         ~/.config/jupyter-agent/trusted-keys/\n"

void ag_session_opts_init(ag_session_opts_t *o);
void ag_session_opts_release(ag_session_opts_t *o);
/* Handle one of AG_SESSION_LONGOPTS; -1 with err set if `opt` is not one
 * of them (err->text empty) or its value is bad. */
int ag_session_parse_flag(ag_session_opts_t *o, int opt, const char *value,
                          err_t *err);

ag_session_t *ag_session_start(const ag_session_opts_t *o, err_t *err);
ag_session_t *ag_session_attach(const char *connection_file,
                                bool allow_unsigned, err_t *err);
void ag_session_destroy(ag_session_t **s);

kb_kernel_t *ag_session_kernel(ag_session_t *s); /* borrowed */
/* Warnings the user must see once (no sandbox, limits not enforced). */
void ag_session_print_warnings(ag_session_t *s, FILE *f);
/* Host path of the workspace (/mnt/data inside), or NULL if none. */
const char *ag_session_workspace(ag_session_t *s);
/* The sandbox policy as JSON for notebook metadata (new reference). */
json_t *ag_session_policy_json(ag_session_t *s);
/* True when the kernel came warm from a 'jupyter-agent serve' pool (its
 * sandbox then belongs to the server: ag_session_sandbox() is NULL, the
 * workspace is reached through ag_session_workspace()). */
bool ag_session_is_warm(ag_session_t *s);
/* The sandbox, or NULL (--no-sandbox, attached). Borrowed. */
sb_sandbox_t *ag_session_sandbox(ag_session_t *s);

/* --packages DIR and the keys trusted for it (from --trust and the default
 * trusted-keys directories), or NULL when the session has none. Borrowed.
 * ag_session_start installs --install names from them once the kernel is
 * ready (agent/loop/ag_packages.h); a refusal fails the start. */
const char *ag_session_packages_dir(ag_session_t *s);
const pk_trust_t *ag_session_trust(ag_session_t *s);
/* Append an install report (borrowed; a reference is kept) to the
 * session's record, shown under "packages" in ag_session_policy_json. */
void ag_session_record_packages(ag_session_t *s, json_t *report);

/* "60", "1.5", "2m" -> milliseconds. */
int ag_parse_seconds(const char *s, int *ms, err_t *err);
/* "512M", "2G", "1024" -> bytes. */
int ag_parse_bytes(const char *s, size_t *bytes, err_t *err);

#endif
