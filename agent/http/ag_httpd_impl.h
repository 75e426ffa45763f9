/*
 * ag_httpd_impl: the structures of agent/http's daemon, shared by
 * ag_httpd.c (the event loop, connections, the worker pool),
 * ag_httpd_req.c (a request's accessors and answer) and ag_httpd_stream.c
 * (streamed answers). Nothing else includes it. Ownership and locking are
 * as ag_httpd.h states; d->lock is taken before a stream's lock.
 */
#ifndef AGENT_HTTP_AG_HTTPD_IMPL_H
#define AGENT_HTTP_AG_HTTPD_IMPL_H

#include "agent/http/ag_httpd.h"
#include "common/buf.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ag_httpd_kv {
    char *name, *value;
} ag_httpd_kv_t;

typedef struct ag_httpd_kvs {
    ag_httpd_kv_t *v;
    size_t n, cap;
} ag_httpd_kvs_t;

/* Where a request is (see ag_httpd.h for who owns it in each). */
typedef enum ag_httpd_state {
    S_RECEIVING, /* the event loop's */
    S_WORKING,   /* queued or handled: a worker's */
    S_BACK       /* answered by the worker: the event loop's again */
} ag_httpd_state_t;

/* On a worker's stack while it handles a request. */
typedef struct ag_httpd_job {
    bool answered;
} ag_httpd_job_t;

struct ag_httpd_req {
    ag_httpd_t *d;
    struct MHD_Connection *c;
    ag_httpd_req_t *qnext; /* in d->queue */
    ag_httpd_state_t state;
    ag_httpd_job_t *job; /* while a worker has it */
    char *method, *path;
    char peer[INET6_ADDRSTRLEN];
    ag_httpd_kvs_t headers, args;
    buf_t body;
    size_t seen;     /* body bytes offered, kept or not */
    size_t reserved; /* of d->in_flight */
    bool too_big, busy;
    /* the answer */
    bool answered;
    unsigned status;
    char *type;
    char *rbody;
    size_t rlen;
    ag_httpd_kvs_t rheaders;
    ag_httpd_stream_t *stream; /* a reference, given to the response */
};

struct ag_httpd_stream {
    ag_httpd_stream_t *prev, *next; /* in d->streams */
    ag_httpd_t *d;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t room;  /* bytes were taken, or the client went */
    buf_t pending;
    size_t off; /* of pending, already sent */
    char *keepalive;
    bool closed;              /* the writer is done */
    bool gone;                /* the client or the server went */
    bool suspended;           /* the connection waits for bytes */
    struct MHD_Connection *c; /* while the response lives */
    int refs;                 /* writer + answer */
    int64_t sent_ms;          /* when bytes last went out */
};

struct ag_httpd {
    ag_httpd_opts_t o;
    struct MHD_Daemon *mhd;
    unsigned port;
    pthread_mutex_t lock; /* guards the fields below */
    pthread_cond_t work;  /* a request was queued, or stopping */
    pthread_cond_t idle;  /* running, queued or writers went down */
    struct s_conn *conns;
    unsigned nconns;
    uint64_t seq; /* connections accepted */
    ag_httpd_req_t *qhead, *qtail;
    unsigned queued, running, idle_workers, writers;
    pthread_t *tids;
    unsigned ntids;
    ag_httpd_stream_t *streams;
    size_t in_flight;
    bool stopping;
    bool sweep_stop;
    pthread_t sweeper;
    pthread_cond_t sweep_cond;
};

void ag_httpd_kvs_add(ag_httpd_kvs_t *l, const char *name, const char *value);
void ag_httpd_kvs_free(ag_httpd_kvs_t *l);

/* MHD's content reader and free callback for a stream's response (the
 * event loop), and the keep-alive sweep (d->lock held). */
ssize_t ag_httpd_stream_reader(void *cls, uint64_t pos, char *out, size_t max);
void ag_httpd_stream_release(void *cls);
void ag_httpd_streams_sweep(ag_httpd_t *d, int64_t now);

#endif
