/*
 * ag_http: one HTTP POST of a JSON body over libcurl, streaming the
 * response body to a sink. No retry policy here (that lives in the provider
 * layer, which knows whether anything reached the user yet).
 *
 * An ag_http_t keeps one curl handle so that consecutive requests reuse the
 * connection. Not thread-safe: one request at a time per object.
 *
 * Cancellation: opts->cancel points to an int the caller may set from a
 * signal handler or another thread; the transfer is abandoned within about
 * 100 ms and the result is AG_HTTP_INTERRUPTED.
 *
 * Secrets: header lines (which carry API keys) are passed to curl and
 * nowhere else; nothing here logs or reports them.
 */
#ifndef AGENT_LLM_AG_HTTP_H
#define AGENT_LLM_AG_HTTP_H

#include "common/buf.h"
#include "common/err.h"

#include <stdatomic.h>
#include <stddef.h>

typedef struct ag_http ag_http_t;

typedef struct ag_http_opts {
    long connect_timeout_ms;   /* 0 = 10 000 */
    long read_timeout_s;       /* abort when no byte arrives for this long;
                                  0 = 300 */
    size_t max_response_bytes; /* cap on the body; 0 = 32 MiB */
    const atomic_int *cancel;  /* optional; non-zero aborts the transfer */
} ag_http_opts_t;

/* How the transfer ended, independent of the HTTP status. */
enum ag_http_transport {
    AG_HTTP_OK = 0,          /* a complete response was received */
    AG_HTTP_CONNECT = 1,     /* no response at all: DNS, refused, reset,
                                empty reply */
    AG_HTTP_CUT = 2,         /* the response started, then the connection
                                failed before its end */
    AG_HTTP_TIMEOUT = 3,     /* connect or read timeout */
    AG_HTTP_TOO_LARGE = 4,   /* the body passed max_response_bytes */
    AG_HTTP_INTERRUPTED = 5, /* *opts->cancel was set */
    AG_HTTP_ABORTED = 6      /* the sink returned non-zero */
};

typedef struct ag_http_resp {
    long status;                /* last HTTP status seen; 0 if none */
    long retry_after_ms;        /* from retry-after-ms or retry-after
                                   (seconds), -1 when absent */
    char content_type[128];     /* content-type header value, "" if none */
    buf_t body;                 /* the body when status is not 2xx or no
                                   sink was given; owned, see below */
    size_t received;            /* body bytes received in total */
    enum ag_http_transport how; /* how the transfer ended */
    char detail[256];           /* curl's description when how != OK */
} ag_http_resp_t;

/* Body bytes of a 2xx response, in order. Return 0 to go on, non-zero to
 * abort the transfer (resp->how = AG_HTTP_ABORTED). */
typedef int (*ag_http_sink_fn)(const char *data, size_t len, void *arg);

ag_http_t *ag_http_new(void);
void ag_http_destroy(ag_http_t **p);

/* Prepare/release a response record (the caller embeds it). */
void ag_http_resp_init(ag_http_resp_t *r);
void ag_http_resp_release(ag_http_resp_t *r);

/* POST `body` (JSON) to `url` with `headers` (NULL-terminated array of
 * "Name: value" lines). A 2xx body goes to `sink` when given; any other
 * body (capped at 64 KiB) and a 2xx body without sink (capped at
 * max_response_bytes) are collected in resp->body. `resp` must have been
 * initialised; it is reset first.
 * Returns 0 when resp->how is AG_HTTP_OK, else -1 (resp->how and
 * resp->detail say why; err is not used for transport failures so that the
 * caller can word the message). */
int ag_http_post(ag_http_t *h, const ag_http_opts_t *opts, const char *url,
                 const char *const *headers, const char *body,
                 ag_http_sink_fn sink, void *arg, ag_http_resp_t *resp);

#endif
