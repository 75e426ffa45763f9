/*
 * sb_egress_log: the record of one connection through the egress proxy,
 * and where records go. The proxy fills an sb_egress_rec_t for every
 * connection, allowed or refused, and hands it to a recorder; the one
 * recorder today writes a JSON line to a file (--net-log FILE). Another
 * sink (the --audit log) plugs in as another sb_egress_recorder_t.
 */
#ifndef SANDBOX_SB_EGRESS_LOG_H
#define SANDBOX_SB_EGRESS_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sb_egress_rec {
    const char *method;  /* "CONNECT", "GET", ...; "?" before parsing */
    const char *host;    /* as the client named it, or "" */
    unsigned port;       /* 0 when unknown */
    const char *address; /* the resolved address connected to, or "" */
    const char *rule;    /* the rule that allowed it, or "" */
    const char *sni;     /* CONNECT: the ClientHello's server name, or "" */
    bool allowed;        /* the verdict */
    const char *reason;  /* refusals: why; allowed: how it ended */
    uint64_t bytes_up;   /* box -> upstream */
    uint64_t bytes_down; /* upstream -> box */
    int64_t ms;          /* how long the connection lasted */
} sb_egress_rec_t;

typedef struct sb_egress_recorder {
    /* Called once per connection, from the process serving it. */
    void (*record)(void *ctx, const sb_egress_rec_t *r);
    void *ctx; /* the recorder's own */
} sb_egress_recorder_t;

/* The JSON-lines recorder: one line per record appended to the file
 * descriptor `*(int *)ctx` with one write(2) (O_APPEND), each line
 * {"time", "event": "net", "verdict", "method", "host", "port",
 * "address", "rule", "sni", "reason", "bytes_up", "bytes_down", "ms"}. */
void sb_egress_log_jsonl(void *ctx, const sb_egress_rec_t *r);

#endif
