/*
 * sb_egress_proxy: the per-session egress proxy (--allow-net). It runs
 * outside the box, in the host's network namespace, as a process of its
 * own: the launcher forks and execs the binary again with the hidden
 * command SB_EGRESS_PROXY_CMD (sb_egress_proxy_main), so the proxy holds
 * none of the launcher's memory; as root it becomes nobody (65534).
 *
 * It accepts on a Unix socket bound into the box's socket dir (the box's
 * relay carries 127.0.0.1:SB_EGRESS_PORT there) and serves, one thread
 * per connection (a fork each cost ~20 ms a request), HTTP CONNECT (the TLS
 * ClientHello's SNI must be the CONNECT host) and plain absolute-form HTTP (the
 * Host header must be the target). It resolves names itself and judges every
 * destination with sb_egress_rule; refusals are HTTP 403 naming the rule that
 * would allow them. Every connection is recorded (sb_egress_log).
 */
#ifndef SANDBOX_SB_EGRESS_PROXY_H
#define SANDBOX_SB_EGRESS_PROXY_H

#include "sandbox/sb_egress_log.h"
#include "sandbox/sb_egress_rule.h"

#include <stdint.h>

#define SB_EGRESS_PROXY_CMD "__egress-proxy"

/* Caps per session; the defaults are in docs/egress.md. */
typedef struct sb_egress_caps {
    unsigned max_conns;  /* connections at once (32) */
    uint64_t max_up;     /* bytes box -> world, whole session (1 GiB) */
    uint64_t max_down;   /* bytes world -> box, whole session (8 GiB) */
    int conn_seconds;    /* longest connection (900 s) */
    int idle_seconds;    /* longest silence on one (120 s) */
    int connect_seconds; /* to reach upstream (15 s) */
} sb_egress_caps_t;

void sb_egress_caps_default(sb_egress_caps_t *c);

/* Serve `listen_fd` until `life_fd` (a pipe's read end the launcher
 * holds open) reaches EOF; then return (the process exits, ending every
 * connection). `rules_fd` (or -1) is the rules pipe: each line on it
 * ("RULE,RULE", empty for none) replaces the rules for the connections
 * accepted after it; those open keep the rules they were judged by. */
void sb_egress_proxy_serve(int listen_fd, int life_fd, int rules_fd,
                           const sb_egress_rules_t *rules,
                           const sb_egress_caps_t *caps,
                           const sb_egress_recorder_t *rec);

/* Make `rules` (copied) the rules for the next connection. */
void sb_egress_proxy_set_rules(const sb_egress_rules_t *rules);

/* The hidden command: argv = {SB_EGRESS_PROXY_CMD, RULES} (RULES "":
 * none); fd 3 the listening socket, fd 4 the life pipe, fd 5 the record
 * pipe or file (one JSON line a connection) or closed, fd 6 the rules
 * socket or closed (each line applied is answered "+", a bad one "-"),
 * fd 7 --net-secret's sealed TLS configuration (read and closed before
 * privileges drop) or closed. Returns the exit code. */
int sb_egress_proxy_main(int argc, char **argv);

#endif
