/*
 * kb_serve: a long-running process that keeps a pool of warm sandboxed
 * kernels (kernel-bridge/pool/kb_pool.h) between commands, and the client side
 * that exec/run/ask use to take one.
 *
 * Transport: a unix SOCK_SEQPACKET socket, mode 0600 in a 0700 directory
 * ($JUPYTER_AGENT_SERVE_SOCKET, else $XDG_RUNTIME_DIR/jupyter-agent/
 * serve.sock, else $HOME/.cache/jupyter-agent/serve.sock; never a place
 * others can write such as /tmp: with neither variable set there is no
 * default). Peer credentials are checked on both ends: the server accepts
 * only its own uid and root (SO_PEERCRED); the client talks only to a
 * server of its own uid, through a socket whose directory is its own with
 * mode 0700, and sends nothing before both checks pass. One JSON object
 * per message; file descriptors travel with SCM_RIGHTS.
 *
 * The server is single-threaded and never blocks on a client: it accepts
 * every waiting connection each round, sends without blocking, and drops a
 * client whose unread replies fill its send buffer (64 KiB).
 *
 *   client                                  server
 *   {"op":"take","kernel":K,"policy":P} ->  <- {"ok":true,"run_dir","uid",
 *                                              "gid","pid","warnings"}
 *                                              + [pidfd, workspace dir fd]
 *                                           <- {"ok":false,"miss":true,...}
 *   {"op":"spawn","argv","env"} + [out] ->  <- {"ok":true} + [pidfd]
 *   {"op":"reap"}                       ->  <- {"ok":true,"done":B,"why":S}
 *   {"op":"kill"}                       ->  <- {"ok":true}
 *   {"op":"stats"}                      ->  <- {"ok":true, pool counters,
 *                                              warm-up times: warmup_last_ms,
 *                                              warmup_p50_ms (last
 *                                              warmup_window), warmup_max_ms}
 *   {"op":"network","pid","allow_net"}  ->  <- {"ok":true,"allow_net"}: the
 *                                              handed-out box with that pid
 *                                              judges its next connections
 *                                              by the new rules (stats lists
 *                                              them under "network")
 *   {"op":"stop"}                       ->  <- {"ok":true,"sessions_left":N}:
 *                                              the socket and the unused
 *                                              warm kernels go at once; the
 *                                              server exits when the N
 *                                              sessions in use have ended
 *   hang-up                                 box killed and removed
 *
 * The server owns every sandbox (their run dirs, cgroups, PDEATHSIG); a
 * connection owns at most one taken kernel, destroyed when it hangs up, so
 * a client that crashes leaks nothing. The client attaches to the kernel
 * through the connection file it writes into the box's run dir, signals
 * it through the pidfd it was given, and reaches /mnt/data through the
 * workspace dir fd (files in with --file, out with --keep-workspace).
 */
#ifndef KERNEL_BRIDGE_POOL_KB_SERVE_H
#define KERNEL_BRIDGE_POOL_KB_SERVE_H

#include "common/err.h"
#include "kernel-bridge/launch/kb_launcher.h"
#include "sandbox/sb_policy.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct kb_serve_opts {
    const char *socket_path;   /* NULL = kb_serve_default_path() */
    const char *kernel_name;   /* NULL = "python3" */
    const sb_policy_t *policy; /* borrowed; NULL = default */
    unsigned pool_size;        /* 0 = 4 */
    unsigned pool_max;         /* growth cap on misses; 0 = kb_pool's auto */
    const char *preload;       /* warm-up code, or NULL */
    bool factory;          /* fork kernels from one preloaded factory process
                              (kb_factory.h: shared pages) instead of starting a
                              fresh interpreter per kernel */
    int warmup_timeout_ms; /* abandon and retry a warm-up not ready after
                              this (kb_pool.h); 0 = 60 s */
    /* Called once the socket listens (e.g. to print it); may be NULL. */
    void (*on_listening)(const char *path, void *arg);
    void *arg;
} kb_serve_opts_t;

/* The socket path the server and clients agree on (new string), or NULL
 * when neither XDG_RUNTIME_DIR nor HOME is set (absolute). */
char *kb_serve_default_path(void);

/* Run the server until SIGINT/SIGTERM (then every box is killed and the
 * socket removed) or a "stop" request (then the socket and the unused
 * kernels go at once, and the server returns once every session it handed
 * out has ended). Returns 0 or -1 with err set. */
int kb_serve_run(const kb_serve_opts_t *o, err_t *err);

/* Client: take a warm kernel for `kernel_name` under `policy` (borrowed;
 * keep_workspace_dir, if set, is honoured by the client at the end).
 * Returns a launcher for kb_kernel_start() (caller owns it), or NULL with:
 *   *no_server = true   nothing listens at the socket (err ERR_USAGE);
 *   *no_server = false  the server had nothing matching ready (a miss,
 *                       err ERR_KERNEL) or failed.
 * `socket_path` NULL = kb_serve_default_path(). */
kb_launcher_t *kb_serve_take(const char *socket_path, const char *kernel_name,
                             const sb_policy_t *policy, bool *no_server,
                             err_t *err);
/* For a launcher from kb_serve_take: "/proc/self/fd/N" of the box's
 * /mnt/data (borrowed), the dir fd itself, and the server's warnings
 * about the box ("" if none). NULL / -1 for other launchers. */
const char *kb_serve_launcher_workspace(kb_launcher_t *l);
const char *kb_serve_launcher_warnings(kb_launcher_t *l);
/* Commands in the box of a kernel taken from serve (sandbox/sb_proc.h):
 * serve passes the box's command socket with the kernel. A new engine,
 * or NULL + err. */
struct sb_proc_engine *kb_serve_launcher_proc_engine(kb_launcher_t *l,
                                                     err_t *err);
/* Copy host file `host_path` to /mnt/data/`name` of the live box (created
 * fresh, owned by the box user, at most the policy's workspace size). */
int kb_serve_launcher_add_file(kb_launcher_t *l, const char *host_path,
                               const char *name, err_t *err);

/* One request to the server outside a session ("stats", "stop"): the
 * reply (new reference) or NULL with err set. */
json_t *kb_serve_request(const char *socket_path, const char *op, err_t *err);
/* The same for any request object `req` (stolen), e.g. {"op":"network",
 * "pid":N,"allow_net":RULES}. */
json_t *kb_serve_call(const char *socket_path, json_t *req, err_t *err);

#endif
