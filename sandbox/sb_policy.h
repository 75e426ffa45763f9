/*
 * sb_policy: the limits and mounts of one sandbox, shared by every
 * subcommand through the same flags (sb_policy_flags(): --memory, --cpus,
 * --pids, --disk, --tmp, --shm, --nofile, --fsize, --env, --bind,
 * --keep-workspace, --seccomp-audit, --engine, --allow-net, --net-log,
 * --net-secret, --net-ca, and --network, which is refused).
 *
 * Callers embed an sb_policy_t, pair sb_policy_init_default() with
 * sb_policy_release(), and may change fields directly; every string and
 * array field is owned by the policy (heap copies).
 *
 * Invariants after sb_policy_init_default(): sizes are bytes and > 0,
 * cpus > 0, pids >= 1, network is false. sb_policy_parse_flag() keeps them.
 */
#ifndef SANDBOX_SB_POLICY_H
#define SANDBOX_SB_POLICY_H

#include "common/cliopt.h"
#include "common/err.h"
#include "common/strv.h"
#include "sandbox/sb_engine.h"
#include "sandbox/sb_files.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where things are inside every sandbox. */
#define SB_WORKSPACE_PATH "/mnt/data"
#define SB_HOME_PATH "/home/user"
/* First on the box's PATH: `python` (the box's python3) and a `pip` that
 * says where packages come from (written by the sandbox at each spawn). */
#define SB_BIN_PATH "/opt/jupyter-agent/bin"
#define SB_SANDBOX_UID 1000 /* uid and gid of the sandboxed program inside */
/* --allow-net: the egress proxy's port on the box's loopback, and its Unix
 * socket in the box's socket dir (sandbox/sb_egress_proxy.h). */
#define SB_EGRESS_PORT 3128
#define SB_EGRESS_SOCK "egress.sock"
/* --net-secret / --net-ca: the box's CA bundle (the host's trust store,
 * --net-ca, the session CA), written read-only at each spawn and bound over
 * the system bundle too (sb_sandbox_plan.c). */
#define SB_EGRESS_CA_BUNDLE "/etc/jupyter-agent-ca-bundle.pem"
#define SB_SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

typedef struct sb_bind {
    char *host;   /* owned; absolute host path, must exist at spawn */
    char *inside; /* owned; absolute path inside, no ".." components */
} sb_bind_t;

typedef struct sb_policy {
    uint64_t given; /* the flags of sb_policy_flags() that were given, a bit
                       per row (cliopt_group_t.given) */
    uint64_t memory_bytes;    /* memory limit incl. tmpfs pages (2 GiB) */
    uint64_t swap_bytes;      /* swap allowed on top of memory (0) */
    unsigned pids;            /* processes + threads in the box (128) */
    double cpus;              /* CPU quota in CPUs (1.0) */
    uint64_t workspace_bytes; /* size of the /mnt/data tmpfs (512 MiB) */
    uint64_t tmp_bytes;       /* size of /tmp and of the home tmpfs (256 MiB) */
    uint64_t shm_bytes;       /* size of /dev/shm (64 MiB) */
    uint64_t nofile;          /* RLIMIT_NOFILE (4096) */
    uint64_t fsize_bytes;     /* RLIMIT_FSIZE; 0 = largest tmpfs size */
    bool network;             /* false: own netns with loopback only */
    char **env_allow;         /* owned, NULL-terminated names passed through */
    size_t n_env_allow;       /* entries in env_allow */
    char **env_secret;        /* owned, NULL-terminated: names in env_allow
                                 passed although they look like secrets
                                 (--env-secret); NULL when none */
    size_t n_env_secret;      /* entries in env_secret */
    sb_bind_t *binds;         /* owned; extra read-only bind mounts */
    size_t n_binds;           /* entries in binds */
    char *keep_workspace_dir; /* owned; copy /mnt/data here at the end */
    sb_files_out_fn files_out_fn; /* borrowed: told of each file copied out
                                     (sb_files_out_opts_t.on_file), or NULL */
    void *files_out_arg;
    bool out_force;         /* --force: files out may go into an existing
                               non-empty directory (never overwriting) */
    bool out_keep_exec;     /* --keep-exec: files out keep the owner's
                               exec bit */
    bool seccomp_audit;     /* let through and report what the seccomp allow
                               list lacks (--seccomp-audit) */
    bool home_is_workspace; /* $HOME (/home/user) is the workspace itself,
                               bound there, not a tmpfs of its own: what
                               code written for E2B's template expects
                               (agent/e2b); no flag sets it */
    sb_engine_t engine;     /* what runs the box (--engine; default
                               sb_engine_default()) */
    char *allow_net;        /* owned; --allow-net rules, comma-joined
                               (checked by sb_egress_rules_parse), or
                               NULL: no way out at all */
    char *net_log;          /* owned; --net-log FILE: the proxy's
                               connection records, or NULL */
    /* borrowed: told of each connection the proxy recorded (the
     * sb_egress_log JSON object, borrowed), from a thread of the
     * sandbox's own while the proxy runs; or NULL (--audit's hook) */
    void (*net_record_fn)(void *arg, const json_t *rec);
    void *net_record_arg;
    char **net_secret;   /* owned, NULL-terminated: --net-secret specs
                            as given (each checked by
                            sb_egress_secret_spec_parse; the files are
                            read at spawn), or NULL when none */
    size_t n_net_secret; /* entries in net_secret */
    char *net_ca;        /* owned; --net-ca FILE (PEM) trusted for
                            upstreams besides the host's store, or NULL */
} sb_policy_t;

void sb_policy_init_default(sb_policy_t *p);
void sb_policy_release(sb_policy_t *p);
/* Deep copy of `src` into `dst` (uninitialised); never fails. */
void sb_policy_copy(sb_policy_t *dst, const sb_policy_t *src);

/* The policy flags (--memory, --cpus, ... --network) as one table whose
 * rows change `p`; every command that starts a sandbox passes this group
 * to getopt_long through common/cliopt.h, and --help prints its rows.
 * Sizes go through common/size.h; each size flag refuses 0. */
cliopt_group_t sb_policy_flags(sb_policy_t *p);

/* Was policy flag `name` ("engine", "memory"; no "--") given? */
bool sb_policy_flag_given(const sb_policy_t *p, const char *name);

/* Parse one policy flag outside getopt. `flag` may carry its value inline
 * ("--memory=2G"), else the value is `value` (the next argv entry, or NULL
 * at the end). Returns the number of argv entries consumed (1 or 2), 0
 * when `flag` is not a policy flag (nothing changed), or -1 with ERR_USAGE
 * in `err` when the value is missing or malformed. */
int sb_policy_parse_flag(sb_policy_t *p, const char *flag, const char *value,
                         err_t *err);
/* The copy-out rules for this policy: bytes capped at the workspace size,
 * default entry and depth caps, --force and --keep-exec. */
void sb_policy_out_opts(const sb_policy_t *p, sb_files_out_opts_t *o);
/* "2 GiB", "512 MiB", "1.5 GiB", "300 bytes" into buf; returns buf. */
const char *sb_policy_format_bytes(uint64_t n, char *buf, size_t size);

/* Add a name to the environment allow-list (no '=' allowed); -1 if bad,
 * or if the name looks like a secret (sb_policy_env_secret_word): the
 * message names the word and --env-secret. */
int sb_policy_allow_env(sb_policy_t *p, const char *name, err_t *err);
/* The same for a name passed on purpose although it looks like a secret
 * (--env-secret NAME); any valid name is accepted. */
int sb_policy_allow_env_secret(sb_policy_t *p, const char *name, err_t *err);
/* Add a read-only bind "HOST:INSIDE" (or HOST, same path inside). */
int sb_policy_add_bind(sb_policy_t *p, const char *host, const char *inside,
                       err_t *err);

/* The environment a sandboxed program gets: PATH, HOME, LANG=C.UTF-8,
 * TERM (from `host_env` if set, else "dumb"), with --allow-net the proxy
 * variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY, their lower-case
 * forms, PIP_PROXY) and, with --net-secret or --net-ca, SSL_CERT_FILE,
 * REQUESTS_CA_BUNDLE, PIP_CERT, CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS
 * naming SB_EGRESS_CA_BUNDLE, then the allow-listed names
 * found in `host_env`, then `extra` ("NAME=value" entries, may be NULL).
 * Names that look like secrets (sb_policy_env_secret_word) are passed
 * from `host_env` only when given with --env-secret.
 * Returns a new NULL-terminated array; free with strv_free(). */
char **sb_policy_build_env(const sb_policy_t *p, char *const host_env[],
                           const char *const extra[]);
/* True if `name` looks like it holds a secret (see below). */
bool sb_policy_env_name_is_secret(const char *name);
/* Why `name` looks like a secret: one of its '_'-separated words
 * (case-insensitively) is KEY, TOKEN, SECRET, PASS, PASSWD, PASSWORD,
 * PASSPHRASE, CREDENTIAL, CREDS, AUTH, AUTHORIZATION, COOKIE or PAT, or
 * ends in KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL(S)
 * (APIKEY, AUTHTOKEN), each with an optional plural S. Whole words only:
 * GIT_AUTHOR_NAME and PASSAGE_DIR are not secrets. Returns the word as
 * written in `name` in `word` (NUL-terminated, cut to `size`) and true,
 * or false. */
bool sb_policy_env_secret_word(const char *name, char *word, size_t size);

/* A JSON description (new reference) for notebook metadata. */
json_t *sb_policy_to_json(const sb_policy_t *p);

/* Effective RLIMIT_FSIZE: fsize_bytes, or the largest tmpfs when 0. */
uint64_t sb_policy_fsize(const sb_policy_t *p);

#endif
