/*
 * e2b_sandbox: one E2B sandbox = one of our boxes (an ag_session: a
 * kernel in its sandbox, with the operator's policy flags and limits),
 * an entry of the shared session table (agent/session/ag_registry.h),
 * its own access tokens, and a thread of its own.
 *
 * The thread: boxes die with the thread that spawned them
 * (PR_SET_PDEATHSIG), so each sandbox's session is started, restarted and
 * destroyed on its own thread, never on a connection's. Work that must run
 * there (a kernel execute, a restart) goes through e2b_sandbox_call; work
 * that only reads or writes the workspace through its directory fd runs
 * on the caller's thread between e2b_sandbox_enter and e2b_sandbox_leave,
 * which keep the session alive meanwhile.
 *
 * Ending (DELETE, the timeout, shutdown, a failed start): the entry turns
 * ENDED at once (its id answers 404 from then on), running calls see
 * e2b_sandbox_ending() and stop, the thread waits for enter/leave users to
 * leave, destroys the session (kernel killed, box, cgroup and run dir
 * removed), then marks the entry gone so it stops counting against
 * --max-sandboxes.
 */
#ifndef AGENT_E2B_E2B_SANDBOX_H
#define AGENT_E2B_E2B_SANDBOX_H

#include "agent/session/ag_registry.h"
#include "agent/session/ag_session.h"
#include "common/err.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* The envd version we answer: the SDKs refuse below 0.1.0 and switch
 * features on by version (0.4.0: no default user; 0.6.x: file metadata,
 * watch entry info). */
#define E2B_ENVD_VERSION "0.5.4"
/* Where E2B's template works; here the same tmpfs as /mnt/data (see
 * docs/e2b.md, "Files"). */
#define E2B_HOME "/home/user"
/* Token length in hex characters. */
#define E2B_TOKEN_LEN 64

/* What the paused sandboxes of a server hold on disk (--pause-disk). */
typedef struct e2b_pause_use {
    pthread_mutex_t lock;
    uint64_t bytes; /* counted while paused */
} e2b_pause_use_t;

/* What every sandbox of a server shares. Borrowed; outlives them. */
typedef struct e2b_config {
    const ag_session_opts_t *session; /* the operator's flags and policy */
    ag_registry_t *registry;          /* the session table */
    int default_timeout_s;            /* a create without "timeout" (300) */
    int max_timeout_s;                /* the longest allowed (86400) */
    const char *pause_dir;     /* paused sandboxes' files (ag_pause_dir), or
                                  NULL: pausing is refused */
    uint64_t pause_disk_bytes; /* cap on pause_use->bytes; 0 = none */
    e2b_pause_use_t *pause_use;
} e2b_config_t;

typedef struct e2b_sandbox e2b_sandbox_t;

/* What POST /sandboxes asked for. All borrowed. */
typedef struct e2b_create {
    const char *template_id; /* as asked: "code-interpreter-v1", "base" */
    const char *kernel_name; /* the kernelspec it maps to */
    int timeout_s;           /* life from now */
    const json_t *metadata;  /* object of strings, or NULL */
    const json_t *env_vars;  /* object of strings, or NULL */
    const char *owner;       /* the registry owner label */
    const char *allow_net;   /* network.allowOut as --allow-net rules ("":
                                none), or NULL: the server's */
} e2b_create_t;

/* Create a sandbox and wait until its kernel is ready. Returns its table
 * entry with a reference for the caller (the payload is the sandbox), or
 * NULL + err: ERR_USAGE when the table is full, the start's error
 * otherwise (the box then is already being removed). */
ag_reg_entry_t *e2b_sandbox_create(const e2b_config_t *cfg,
                                   const e2b_create_t *c, err_t *err);
/* The sandbox of a table entry (borrowed, valid while the entry is). */
e2b_sandbox_t *e2b_sandbox_of(ag_reg_entry_t *e);
ag_reg_entry_t *e2b_sandbox_entry(e2b_sandbox_t *sb); /* borrowed */

const char *e2b_sandbox_id(const e2b_sandbox_t *sb);
const char *e2b_sandbox_template(const e2b_sandbox_t *sb);
const char *e2b_sandbox_envd_token(const e2b_sandbox_t *sb);
const char *e2b_sandbox_traffic_token(const e2b_sandbox_t *sb);
/* Does `token` (a header value, may be NULL) prove access to `sb`? Either
 * of its two tokens, compared in constant time. */
bool e2b_sandbox_token_ok(const e2b_sandbox_t *sb, const char *envd_token,
                          const char *traffic_token);
/* The sandbox as GET /sandboxes/{id} answers it (new reference). */
json_t *e2b_sandbox_info(e2b_sandbox_t *sb, bool with_tokens);
/* The create's envVars (borrowed object; may be empty). */
const json_t *e2b_sandbox_env(const e2b_sandbox_t *sb);
const sb_policy_t *e2b_sandbox_policy(const e2b_sandbox_t *sb);
/* The operator's --timeout for one execution (ms, 0 = none) and
 * --max-output (bytes). */
int e2b_sandbox_exec_timeout_ms(const e2b_sandbox_t *sb);
size_t e2b_sandbox_max_output(const e2b_sandbox_t *sb);

/* Pause (docs/e2b.md, "Pause and resume"; e2b_sandbox_pause.c). The
 * sandbox then shows "paused", keeps no deadline, refuses its envd and
 * interpreter traffic (unless autoResume), and ends only when killed (or
 * the server stops). Either kind leaves no process of the box.
 *  - memory (the gvisor engine): the whole box is checkpointed
 *    (ag_session_pause_memory) into a 0700 image under the server's
 *    pause_dir, sealed by a key only this process holds; the session is
 *    kept, its kernel saved. A kernel that cannot be saved so (a warm
 *    kernel, a TCP socket open in it) answers ERR_USAGE and runs on; any
 *    other failure loses the kernel, and the sandbox is ended.
 *  - files only (every engine): /home/user is kept under pause_dir, the
 *    commands and the kernel are stopped and the box removed.
 * On the namespaces engine a memory pause is refused (ERR_USAGE, the
 * reason). 0 paused, 1 it already was, -1 + err. */
int e2b_sandbox_pause(e2b_sandbox_t *sb, bool memory, err_t *err);
/* Resume a paused sandbox, with new tokens (the old ones reach nothing).
 * A memory pause: the seal is checked and the box restored, the
 * kernel's variables, modules and open files back; files only: a new box
 * with the files put back and a fresh kernel. *memory_kept says which.
 * 0 resumed, 1 it was running, -1 + err (the sandbox stays paused, or,
 * when a restore failed half-way, is ended). */
int e2b_sandbox_resume(e2b_sandbox_t *sb, bool *memory_kept, err_t *err);
/* autoResume: a request to a paused sandbox carrying one of its tokens
 * resumes it, keeping those tokens, with the create's timeout again. 0
 * (resumed, or it was running), -1 + err: ERR_USAGE when the sandbox has
 * no autoResume, ERR_VERIFY when the token is not its own (nothing done
 * either way), else the resume's error. */
int e2b_sandbox_wake(e2b_sandbox_t *sb, const char *envd_token,
                     const char *traffic_token, err_t *err);
bool e2b_sandbox_paused(e2b_sandbox_t *sb);
/* autoPause: the timeout pauses (memory: with the kernel's memory)
 * instead of killing; resume: autoResume (needs memory). */
void e2b_sandbox_set_auto_pause(e2b_sandbox_t *sb, bool on, bool memory,
                                bool resume);

/* PUT /sandboxes/ID/network: replace the box's --allow-net rules for its
 * next connections, and for the box a resume starts. ERR_USAGE when it
 * has no proxy (created without network rules on a server without
 * --allow-net) or is paused; the rules' errors as sb_sandbox_set_net_rules.
 * From any thread. */
int e2b_sandbox_set_net_rules(e2b_sandbox_t *sb, const char *rules, err_t *err);

/* Has the sandbox been asked to end (or is it paused)? Long-running work
 * polls it. */
bool e2b_sandbox_ending(e2b_sandbox_t *sb);

/* Use the live session from the caller's thread: true with the session
 * kept alive until e2b_sandbox_leave, false when it is ending (then do
 * not call leave). */
bool e2b_sandbox_enter(e2b_sandbox_t *sb);
void e2b_sandbox_leave(e2b_sandbox_t *sb);
/* Between enter and leave: the session (borrowed), its workspace dir fd
 * (/mnt/data = /home/user inside) and its kernel. */
ag_session_t *e2b_sandbox_session(e2b_sandbox_t *sb);
int e2b_sandbox_workspace_fd(e2b_sandbox_t *sb);

/* Run fn(sb, arg) on the sandbox's own thread and wait for it: 0, or -1
 * when the sandbox ended before fn could run (fn is then not called).
 * Calls run one at a time, in order. */
int e2b_sandbox_call(e2b_sandbox_t *sb, void (*fn)(e2b_sandbox_t *, void *),
                     void *arg);

/* Queue fn(sb, arg) for the sandbox's thread without waiting (an
 * /execute whose answer streams meanwhile). It runs exactly once: in
 * turn, or, when the sandbox ends first, while it ends, with
 * e2b_sandbox_ending() true (then it must only clean up). */
void e2b_sandbox_post(e2b_sandbox_t *sb, void (*fn)(e2b_sandbox_t *, void *),
                      void *arg);

/* State a handler family keeps per sandbox (the interpreter's contexts,
 * the processes started), made on first use by make(sb) under the
 * sandbox's lock (make must not block). When the sandbox ends, end(sb,
 * state) runs on its thread after every enter/leave user left and before
 * the box is destroyed (stop what runs in it); free(state) runs when the
 * sandbox is freed. end and free may be NULL. Returns the state
 * (borrowed; valid while the caller holds the sandbox's entry). */
typedef enum e2b_slot {
    E2B_SLOT_INTERP = 0,  /* agent/e2b/e2b_interp.c */
    E2B_SLOT_PROCESS = 1, /* agent/e2b/e2b_process.c */
    E2B_SLOT_WATCH = 2,   /* agent/e2b/e2b_watch_poll.c */
    E2B_NSLOTS = 3,
} e2b_slot_t;

void *e2b_sandbox_slot(e2b_sandbox_t *sb, e2b_slot_t slot,
                       void *(*make)(e2b_sandbox_t *sb),
                       void (*end)(e2b_sandbox_t *sb, void *state),
                       void (*free_fn)(void *state));

#endif
