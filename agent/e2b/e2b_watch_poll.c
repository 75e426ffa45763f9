/*
 * e2b_watch_poll: envd's polling watchers (CreateWatcher,
 * GetWatcherEvents, RemoveWatcher) on the inotify core of
 * e2b_watch_impl.h, and the per-sandbox count of watches that caps both
 * kinds. The watchers hang on the sandbox (its E2B_SLOT_WATCH state) and
 * have no thread: GetWatcherEvents drains what the core's inotify queue
 * holds now, at most E2B_WATCHER_MAX_EVENTS (plus the rest of one read)
 * per call; the rest waits in the kernel for the next call. A queue that
 * overflowed between two calls makes the watcher answer the loss from
 * then on. Pausing or ending the sandbox removes every watcher.
 */
#include "agent/e2b/e2b_watch.h"
#include "agent/e2b/e2b_watch_impl.h"

#include "agent/e2b/e2b_connect.h"
#include "common/xalloc.h"

#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define ID_BYTES 16

typedef struct s_watcher {
    char id[2 * ID_BYTES + 1];
    e2b_wcore_t *core; /* owned */
    const char *lost;  /* static: why the watch is over, or NULL */
    struct s_watcher *next;
} s_watcher_t;

/* A sandbox's E2B_SLOT_WATCH. */
typedef struct s_state {
    atomic_int places;  /* watches open (streams and watchers) */
    pthread_mutex_t mu; /* guards list */
    s_watcher_t *list;  /* owned */
} s_state_t;

static void
s_watcher_free(s_watcher_t *w)
{
    e2b_wcore_destroy(&w->core);
    free(w);
}

static void *
s_make(e2b_sandbox_t *sb)
{
    (void)sb;
    s_state_t *s = xcalloc(1, sizeof *s);
    atomic_init(&s->places, 0);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

/* Paused or ending: every watcher goes (the next call answers not_found).
 * The state stays usable for a resumed sandbox. */
static void
s_end(e2b_sandbox_t *sb, void *state)
{
    (void)sb;
    s_state_t *s = state;
    pthread_mutex_lock(&s->mu);
    while (s->list) {
        s_watcher_t *w = s->list;
        s->list = w->next;
        s_watcher_free(w);
    }
    pthread_mutex_unlock(&s->mu);
}

static void
s_free(void *state)
{
    s_end(NULL, state);
    s_state_t *s = state;
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static s_state_t *
s_state(e2b_sandbox_t *sb)
{
    return e2b_sandbox_slot(sb, E2B_SLOT_WATCH, s_make, s_end, s_free);
}

atomic_int *
e2b_watch_take(e2b_sandbox_t *sb)
{
    s_state_t *s = s_state(sb);
    int n = atomic_fetch_add(&s->places, 1);
    if (n < E2B_WATCHERS_MAX)
        return &s->places;
    atomic_fetch_sub(&s->places, 1);
    return NULL;
}

static void
s_create(e2b_req_t *r, e2b_sandbox_t *sb, const json_t *msg)
{
    err_t err = {0};
    const char *code = NULL;
    e2b_wcore_t *core = e2b_wcore_new(sb, msg, &code, &err);
    if (!core) {
        e2b_connect_error(r, code, "%s", err.text);
        return;
    }
    s_watcher_t *w = xcalloc(1, sizeof *w);
    w->core = core;
    unsigned char raw[ID_BYTES];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(w->id, sizeof w->id, raw, sizeof raw);
    s_state_t *s = s_state(sb);
    pthread_mutex_lock(&s->mu);
    w->next = s->list;
    s->list = w;
    pthread_mutex_unlock(&s->mu);
    e2b_connect_reply(r, json_pack("{s:s}", "watcherId", w->id));
}

/* The watcher named by msg's watcherId (borrowed; under s->mu), or NULL
 * with *prev untouched. */
static s_watcher_t **
s_find(s_state_t *s, const json_t *msg)
{
    const char *id = json_string_value(json_object_get(msg, "watcherId"));
    if (!id)
        return NULL;
    for (s_watcher_t **p = &s->list; *p; p = &(*p)->next)
        if (strcmp((*p)->id, id) == 0)
            return p;
    return NULL;
}

typedef struct s_batch {
    json_t *events; /* borrowed array */
    size_t n;
} s_batch_t;

static void
s_collect(void *ctx, const json_t *fe)
{
    s_batch_t *b = ctx;
    json_array_append(b->events, (json_t *)fe);
    b->n++;
}

static void
s_events(e2b_req_t *r, s_state_t *s, const json_t *msg)
{
    pthread_mutex_lock(&s->mu);
    s_watcher_t **p = s_find(s, msg);
    if (!p) {
        pthread_mutex_unlock(&s->mu);
        e2b_connect_error(r, "not_found",
                          "no such watcher in this sandbox (removed, or the "
                          "sandbox was paused); create one with "
                          "CreateWatcher");
        return;
    }
    s_watcher_t *w = *p;
    s_batch_t b = {.events = json_array()};
    while (!w->lost && b.n < E2B_WATCHER_MAX_EVENTS &&
           e2b_wcore_read(w->core, s_collect, &b, &w->lost) > 0)
        ;
    const char *lost = w->lost;
    pthread_mutex_unlock(&s->mu);
    if (lost && b.n == 0) {
        json_decref(b.events);
        e2b_connect_error(r, "resource_exhausted", "the watch is over: %s",
                          lost);
        return;
    }
    /* What was read before the loss still goes out; the next call answers
     * the loss. */
    e2b_connect_reply(r, json_pack("{s:o}", "events", b.events));
}

static void
s_remove(e2b_req_t *r, s_state_t *s, const json_t *msg)
{
    pthread_mutex_lock(&s->mu);
    s_watcher_t **p = s_find(s, msg);
    s_watcher_t *w = p ? *p : NULL;
    if (w)
        *p = w->next;
    pthread_mutex_unlock(&s->mu);
    if (!w) {
        e2b_connect_error(r, "not_found", "no such watcher in this sandbox");
        return;
    }
    s_watcher_free(w);
    e2b_connect_reply(r, json_object());
}

bool
e2b_watch_rpc(e2b_req_t *r, e2b_sandbox_t *sb, const char *method)
{
    int which = strcmp(method, "CreateWatcher") == 0      ? 0
                : strcmp(method, "GetWatcherEvents") == 0 ? 1
                : strcmp(method, "RemoveWatcher") == 0    ? 2
                                                          : -1;
    if (which < 0)
        return false;
    json_t *msg = e2b_connect_request(r);
    if (!msg)
        return true;
    if (!e2b_sandbox_enter(sb)) {
        e2b_connect_error(r, "unavailable", "the sandbox ended");
    } else {
        if (which == 0)
            s_create(r, sb, msg);
        else if (which == 1)
            s_events(r, s_state(sb), msg);
        else
            s_remove(r, s_state(sb), msg);
        e2b_sandbox_leave(sb);
    }
    json_decref(msg);
    return true;
}
