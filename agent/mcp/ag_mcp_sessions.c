#include "agent/mcp/ag_mcp_sessions.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a new session waits for ended ones' boxes to go before it is
 * refused for --max-sessions. */
#define TEARDOWN_WAIT_MS 10000

struct ag_mcp_session {
    char id[AG_MCP_SESSION_ID_LEN + 1]; /* hex */
    ag_mcp_server_t *server;            /* owned */
    pthread_mutex_t busy;               /* held by the request using it */
    int refs;               /* the table's (while live) + requests' */
    int running;            /* requests in or waiting for it */
    bool ended;             /* removed from the table */
    int64_t created_ms;     /* clock_mono_ms at creation */
    int64_t used_ms;        /* when a request last ended */
    ag_mcp_session_t *next; /* in the table's list */
    /* The session's own thread runs its requests: the sandboxes it spawns
     * die with the thread that spawned them (PR_SET_PDEATHSIG), so that
     * must be one living as long as the session, not an HTTP connection's. */
    pthread_t thread;         /* runs s_thread */
    pthread_mutex_t jlock;    /* guards the job fields below */
    pthread_cond_t jcond;     /* signals a new job, a done job, or quit */
    const json_t *job;        /* the message to handle (borrowed), or NULL */
    const ag_mcp_io_t *jio;   /* its transport (borrowed) */
    json_t *jresp;            /* the response (owned until taken) */
    bool jdone;               /* jresp is set */
    bool quit;                /* the thread is to destroy the server, end */
    ag_mcp_sessions_t *table; /* counts the session's teardown */
};

struct ag_mcp_sessions {
    pthread_mutex_t lock;   /* guards everything below and refs */
    ag_mcp_session_t *head; /* live sessions */
    int n;                  /* live sessions */
    int max;                /* limit on n */
    int idle_ms;            /* 0 = no limit */
    int lifetime_ms;        /* 0 = no limit */
    /* Ended sessions whose thread still tears their box down; the table
     * outlives them (ag_mcp_sessions_destroy waits on `torn_down`). */
    int tearing_down;
    pthread_cond_t torn_down;
};

ag_mcp_sessions_t *
ag_mcp_sessions_new(int max, int idle_ms, int lifetime_ms)
{
    ag_mcp_sessions_t *t = xcalloc(1, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->torn_down, &ca);
    pthread_condattr_destroy(&ca);
    t->max = max;
    t->idle_ms = idle_ms;
    t->lifetime_ms = lifetime_ms;
    return t;
}

static void *
s_thread(void *arg)
{
    ag_mcp_session_t *s = arg;
    pthread_mutex_lock(&s->jlock);
    for (;;) {
        while (!s->job && !s->quit)
            pthread_cond_wait(&s->jcond, &s->jlock);
        if (s->quit)
            break;
        const json_t *msg = s->job;
        const ag_mcp_io_t *io = s->jio;
        pthread_mutex_unlock(&s->jlock);
        json_t *resp = ag_mcp_server_handle(s->server, msg, io);
        pthread_mutex_lock(&s->jlock);
        s->job = NULL;
        s->jresp = resp;
        s->jdone = true;
        pthread_cond_broadcast(&s->jcond);
    }
    pthread_mutex_unlock(&s->jlock);
    /* Detached (s_free): whoever ended the session did not wait for this.
     * The box's processes are killed, waited for (they are children of
     * this process: no zombie stays) and its cgroup and run dir removed
     * here, off the request that ended it. */
    log_info("mcp: session %.8s… ended; destroying its sandbox", s->id);
    ag_mcp_server_destroy(&s->server);
    ag_mcp_sessions_t *t = s->table;
    pthread_cond_destroy(&s->jcond);
    pthread_mutex_destroy(&s->jlock);
    pthread_mutex_destroy(&s->busy);
    free(s);
    pthread_mutex_lock(&t->lock);
    if (--t->tearing_down == 0)
        pthread_cond_broadcast(&t->torn_down);
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

json_t *
ag_mcp_session_handle(ag_mcp_session_t *s, const json_t *msg,
                      const ag_mcp_io_t *io)
{
    pthread_mutex_lock(&s->jlock);
    s->job = msg;
    s->jio = io;
    s->jdone = false;
    pthread_cond_broadcast(&s->jcond);
    while (!s->jdone)
        pthread_cond_wait(&s->jcond, &s->jlock);
    json_t *resp = s->jresp;
    s->jresp = NULL;
    pthread_mutex_unlock(&s->jlock);
    return resp;
}

/* The last reference is gone: the session's thread tears its box down
 * and frees it, without the caller (a DELETE, the expiry check) waiting
 * for the kernel to die. */
static void
s_free(ag_mcp_session_t *s)
{
    ag_mcp_sessions_t *t = s->table;
    pthread_mutex_lock(&t->lock);
    t->tearing_down++;
    pthread_mutex_unlock(&t->lock);
    pthread_detach(s->thread);
    pthread_mutex_lock(&s->jlock);
    s->quit = true;
    pthread_cond_broadcast(&s->jcond);
    pthread_mutex_unlock(&s->jlock);
}

/* Drop one reference (t->lock held); true when the caller must free. */
static bool
s_unref(ag_mcp_session_t *s)
{
    return --s->refs == 0;
}

/* Unlink `s` from the live list (t->lock held). */
static void
s_unlink(ag_mcp_sessions_t *t, ag_mcp_session_t *s)
{
    for (ag_mcp_session_t **pp = &t->head; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            t->n--;
            s->ended = true;
            ag_mcp_server_cancel(s->server, NULL);
            return;
        }
}

void
ag_mcp_sessions_end_all(ag_mcp_sessions_t *t)
{
    pthread_mutex_lock(&t->lock);
    while (t->head) {
        ag_mcp_session_t *s = t->head;
        s_unlink(t, s);
        bool last = s_unref(s);
        pthread_mutex_unlock(&t->lock);
        if (last)
            s_free(s);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
}

void
ag_mcp_sessions_destroy(ag_mcp_sessions_t **p)
{
    if (!p || !*p)
        return;
    ag_mcp_sessions_t *t = *p;
    ag_mcp_sessions_end_all(t);
    pthread_mutex_lock(&t->lock);
    while (t->tearing_down > 0) /* no box outlives the server */
        pthread_cond_wait(&t->torn_down, &t->lock);
    pthread_mutex_unlock(&t->lock);
    pthread_cond_destroy(&t->torn_down);
    pthread_mutex_destroy(&t->lock);
    free(t);
    *p = NULL;
}

ag_mcp_session_t *
ag_mcp_sessions_add(ag_mcp_sessions_t *t, ag_mcp_server_t **server)
{
    pthread_mutex_lock(&t->lock);
    /* Boxes still being torn down count against --max-sessions: closing
     * and opening sessions in a loop must not pile up boxes. A new session
     * waits a little for them rather than being refused. */
    int64_t until = clock_mono_ms() + TEARDOWN_WAIT_MS;
    while (t->n < t->max && t->n + t->tearing_down >= t->max &&
           clock_mono_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&t->torn_down, &t->lock, &ts);
    }
    if (t->n + t->tearing_down >= t->max) {
        pthread_mutex_unlock(&t->lock);
        ag_mcp_server_destroy(server);
        return NULL;
    }
    ag_mcp_session_t *s = xcalloc(1, sizeof *s);
    unsigned char raw[AG_MCP_SESSION_ID_LEN / 2];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(s->id, sizeof s->id, raw, sizeof raw);
    s->server = *server;
    *server = NULL;
    s->table = t;
    pthread_mutex_init(&s->busy, NULL);
    pthread_mutex_init(&s->jlock, NULL);
    pthread_cond_init(&s->jcond, NULL);
    if (pthread_create(&s->thread, NULL, s_thread, s) != 0) {
        pthread_mutex_unlock(&t->lock);
        log_warn("mcp: cannot start a thread for a new session");
        ag_mcp_server_destroy(&s->server);
        pthread_cond_destroy(&s->jcond);
        pthread_mutex_destroy(&s->jlock);
        pthread_mutex_destroy(&s->busy);
        free(s);
        return NULL;
    }
    s->refs = 2; /* the table's and the caller's */
    s->running = 1;
    s->created_ms = s->used_ms = clock_mono_ms();
    s->next = t->head;
    t->head = s;
    t->n++;
    pthread_mutex_unlock(&t->lock);
    pthread_mutex_lock(&s->busy);
    return s;
}

ag_mcp_session_t *
ag_mcp_sessions_acquire(ag_mcp_sessions_t *t, const char *id, bool exclusive)
{
    if (!id || strlen(id) != AG_MCP_SESSION_ID_LEN)
        return NULL;
    pthread_mutex_lock(&t->lock);
    ag_mcp_session_t *s = t->head;
    /* Constant time per comparison: ids are secrets of their clients. */
    while (s && sodium_memcmp(s->id, id, AG_MCP_SESSION_ID_LEN) != 0)
        s = s->next;
    if (s) {
        s->refs++;
        if (exclusive)
            s->running++;
    }
    pthread_mutex_unlock(&t->lock);
    if (!s || !exclusive)
        return s;
    pthread_mutex_lock(&s->busy);
    if (s->ended) { /* ended while we waited */
        ag_mcp_sessions_release(t, s, true);
        return NULL;
    }
    return s;
}

void
ag_mcp_sessions_release(ag_mcp_sessions_t *t, ag_mcp_session_t *s,
                        bool exclusive)
{
    if (!s)
        return;
    if (exclusive)
        pthread_mutex_unlock(&s->busy);
    pthread_mutex_lock(&t->lock);
    if (exclusive) {
        s->running--;
        s->used_ms = clock_mono_ms();
    }
    bool last = s_unref(s);
    pthread_mutex_unlock(&t->lock);
    if (last)
        s_free(s);
}

int
ag_mcp_sessions_end(ag_mcp_sessions_t *t, const char *id)
{
    if (!id || strlen(id) != AG_MCP_SESSION_ID_LEN)
        return -1;
    pthread_mutex_lock(&t->lock);
    ag_mcp_session_t *s = t->head;
    while (s && sodium_memcmp(s->id, id, AG_MCP_SESSION_ID_LEN) != 0)
        s = s->next;
    bool last = false;
    if (s) {
        s_unlink(t, s);
        last = s_unref(s);
    }
    pthread_mutex_unlock(&t->lock);
    if (last)
        s_free(s);
    return s ? 0 : -1;
}

int
ag_mcp_sessions_expire(ag_mcp_sessions_t *t)
{
    int ended = 0;
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&t->lock);
    ag_mcp_session_t *s = t->head;
    while (s) {
        ag_mcp_session_t *next = s->next;
        bool idle =
            s->running == 0 && t->idle_ms > 0 && now - s->used_ms > t->idle_ms;
        bool old = t->lifetime_ms > 0 && now - s->created_ms > t->lifetime_ms;
        if (idle || old) {
            log_info("mcp: session %.8s… %s", s->id,
                     idle ? "was idle longer than --idle-timeout"
                          : "is older than --max-lifetime");
            s_unlink(t, s);
            ended++;
            if (s_unref(s)) {
                pthread_mutex_unlock(&t->lock);
                s_free(s);
                pthread_mutex_lock(&t->lock);
                s = t->head; /* the list may have changed meanwhile */
                continue;
            }
        }
        s = next;
    }
    pthread_mutex_unlock(&t->lock);
    return ended;
}

int
ag_mcp_sessions_count(ag_mcp_sessions_t *t)
{
    pthread_mutex_lock(&t->lock);
    int n = t->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

ag_mcp_server_t *
ag_mcp_session_server(ag_mcp_session_t *s)
{
    return s->server;
}

const char *
ag_mcp_session_id(const ag_mcp_session_t *s)
{
    return s->id;
}
