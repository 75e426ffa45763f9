/* kb_gateway internals shared by its REST half (kb_gateway.c) and its
 * WebSocket transport (kb_gateway_ws.c). Not a public header; it does not
 * include kb_gateway.h, so the two do not include each other. */
#ifndef KERNEL_BRIDGE_KB_GATEWAY_INT_H
#define KERNEL_BRIDGE_KB_GATEWAY_INT_H

#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>

/* The parts of the server's URL. */
typedef struct kb_gateway_parts {
    bool tls;   /* https */
    char *host; /* owned, without brackets */
    int port;   /* explicit or the scheme's default */
    char *path; /* owned base path without trailing '/'; "" for the root */
} kb_gateway_parts_t;

struct kb_gateway {
    kb_gateway_parts_t parts; /* owned */
    char *shown;              /* owned scheme://host:port/base, no secrets */
    char *auth;               /* owned "token T" or NULL: a secret */
    char *ca_file;            /* owned or NULL */
    char **env;               /* owned "KERNEL_X=V" list or NULL */
    int request_ms;           /* per REST request */
    int reconnect_ms;         /* retry window of a dropped WebSocket */
    char last_reason[320];    /* the server's reason for the last >= 300 */
};

void kb_gateway_release_parts(kb_gateway_parts_t *p);

/* One REST request on `path` (below the base path), `body` borrowed or
 * NULL. 0 with *status set (a status >= 300 leaves the server's reason in
 * g->last_reason for the caller to word; 401, and 403 on a GET or DELETE,
 * are already an error about the token), *reply the parsed JSON body when
 * `reply` is given and the status < 300; -1 when the server could not be
 * reached or its answer was unusable. */
int kb_gateway_request(struct kb_gateway *g, const char *method,
                       const char *path, json_t *body, long *status,
                       json_t **reply, err_t *err);

#endif
