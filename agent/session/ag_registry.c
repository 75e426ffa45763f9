#include "agent/session/ag_registry.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct ag_reg_entry {
    ag_registry_t *t;           /* the table (outlives every entry) */
    char id[AG_REG_ID_LEN + 1]; /* hex, NUL-terminated */
    char *owner;                /* owned */
    ag_reg_state_t state;       /* guarded by t->lock */
    int64_t deadline_ms;        /* guarded by t->lock; 0 = never */
    const char *why;            /* static; why it ended, "" while live */
    int refs;                   /* guarded by t->lock; the table holds one
                                   until the entry is gone */
    bool gone;                  /* ag_reg_gone() was called */
    void *payload;              /* owned through ops */
    const ag_reg_ops_t *ops;    /* borrowed, static */
    struct ag_reg_entry *next;  /* the table's list */
};

struct ag_registry {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* an entry went away */
    ag_reg_entry_t *head;   /* entries not yet gone (live and ended) */
    int count;              /* entries in head's list */
    int max;
};

static const char *const s_state_names[] = {"starting", "running", "ended"};

const char *
ag_reg_state_name(ag_reg_state_t s)
{
    return (unsigned)s < 3 ? s_state_names[s] : "unknown";
}

ag_registry_t *
ag_registry_new(int max)
{
    ag_registry_t *t = xcalloc(1, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
    t->max = max > 0 ? max : 1;
    return t;
}

static void
s_free(ag_reg_entry_t *e)
{
    if (e->ops && e->ops->free)
        e->ops->free(e->payload);
    free(e->owner);
    free(e);
}

/* Drop one reference with the lock held; returns the entry to free (after
 * unlocking) or NULL. */
static ag_reg_entry_t *
s_unref_locked(ag_reg_entry_t *e)
{
    return --e->refs == 0 ? e : NULL;
}

ag_reg_entry_t *
ag_reg_ref(ag_reg_entry_t *e)
{
    pthread_mutex_lock(&e->t->lock);
    e->refs++;
    pthread_mutex_unlock(&e->t->lock);
    return e;
}

void
ag_reg_unref(ag_reg_entry_t **p)
{
    if (!p || !*p)
        return;
    ag_reg_entry_t *e = *p;
    *p = NULL;
    ag_registry_t *t = e->t;
    pthread_mutex_lock(&t->lock);
    ag_reg_entry_t *dead = s_unref_locked(e);
    pthread_mutex_unlock(&t->lock);
    if (dead)
        s_free(dead);
}

ag_reg_entry_t *
ag_registry_add(ag_registry_t *t, const char *owner, int64_t deadline_ms,
                void *payload, const ag_reg_ops_t *ops, err_t *err)
{
    pthread_mutex_lock(&t->lock);
    if (t->count >= t->max) {
        int n = t->count;
        pthread_mutex_unlock(&t->lock);
        err_set(err, ERR_USAGE,
                "%d sessions exist and this server allows %d at once; end "
                "one or wait for one to time out",
                n, t->max);
        return NULL;
    }
    ag_reg_entry_t *e = xcalloc(1, sizeof *e);
    unsigned char raw[AG_REG_ID_LEN / 2];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(e->id, sizeof e->id, raw, sizeof raw);
    e->t = t;
    e->owner = xstrdup(owner ? owner : "");
    e->state = AG_REG_STARTING;
    e->deadline_ms = deadline_ms;
    e->why = "";
    e->refs = 2; /* the table's and the caller's */
    e->payload = payload;
    e->ops = ops;
    e->next = t->head;
    t->head = e;
    t->count++;
    pthread_mutex_unlock(&t->lock);
    return e;
}

ag_reg_entry_t *
ag_registry_get(ag_registry_t *t, const char *id)
{
    if (!id || strlen(id) != AG_REG_ID_LEN)
        return NULL;
    ag_reg_entry_t *found = NULL;
    pthread_mutex_lock(&t->lock);
    for (ag_reg_entry_t *e = t->head; e; e = e->next) {
        /* Constant time per entry: ids are capabilities to nothing by
         * themselves (each door checks its own token), but leak nothing. */
        if (e->state != AG_REG_ENDED &&
            sodium_memcmp(e->id, id, AG_REG_ID_LEN) == 0) {
            found = e;
            e->refs++;
            break;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

void
ag_reg_end(ag_reg_entry_t *e, const char *why)
{
    pthread_mutex_lock(&e->t->lock);
    bool first = e->state != AG_REG_ENDED;
    if (first) {
        e->state = AG_REG_ENDED;
        e->why = why ? why : "ended";
    }
    pthread_mutex_unlock(&e->t->lock);
    if (first && e->ops && e->ops->end)
        e->ops->end(e->payload, e->why);
}

int
ag_registry_end(ag_registry_t *t, const char *id, const char *why)
{
    ag_reg_entry_t *e = ag_registry_get(t, id);
    if (!e)
        return -1;
    ag_reg_end(e, why);
    ag_reg_unref(&e);
    return 0;
}

void
ag_reg_gone(ag_reg_entry_t *e)
{
    ag_registry_t *t = e->t;
    pthread_mutex_lock(&t->lock);
    if (e->gone) {
        pthread_mutex_unlock(&t->lock);
        return;
    }
    e->gone = true;
    e->state = AG_REG_ENDED;
    if (!*e->why)
        e->why = "ended";
    for (ag_reg_entry_t **pp = &t->head; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    t->count--;
    ag_reg_entry_t *dead = s_unref_locked(e); /* the table's reference */
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
    if (dead)
        s_free(dead);
}

/* Live entries matching `pred` (NULL: all), referenced. */
static ag_reg_entry_t **
s_collect(ag_registry_t *t, bool expired_only, size_t *n)
{
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&t->lock);
    ag_reg_entry_t **v = xcalloc((size_t)t->count + 1, sizeof *v);
    size_t k = 0;
    for (ag_reg_entry_t *e = t->head; e; e = e->next) {
        if (e->state == AG_REG_ENDED)
            continue;
        if (expired_only && !(e->deadline_ms > 0 && now >= e->deadline_ms))
            continue;
        e->refs++;
        v[k++] = e;
    }
    pthread_mutex_unlock(&t->lock);
    *n = k;
    return v;
}

ag_reg_entry_t **
ag_registry_list(ag_registry_t *t, size_t *n)
{
    return s_collect(t, false, n);
}

int
ag_registry_expire(ag_registry_t *t)
{
    size_t n;
    ag_reg_entry_t **v = s_collect(t, true, &n);
    int ended = 0;
    for (size_t i = 0; i < n; i++) {
        const ag_reg_ops_t *ops = v[i]->ops;
        if (!(ops && ops->expire && ops->expire(v[i]->payload))) {
            ag_reg_end(v[i], "timeout");
            ended++;
        }
        ag_reg_unref(&v[i]);
    }
    free(v);
    return ended;
}

int
ag_registry_count(ag_registry_t *t)
{
    pthread_mutex_lock(&t->lock);
    int n = t->count;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int
ag_registry_max(const ag_registry_t *t)
{
    return t->max;
}

void
ag_registry_destroy(ag_registry_t **p, int wait_ms)
{
    if (!p || !*p)
        return;
    ag_registry_t *t = *p;
    *p = NULL;
    size_t n;
    ag_reg_entry_t **v = s_collect(t, false, &n);
    for (size_t i = 0; i < n; i++) {
        ag_reg_end(v[i], "shutdown");
        ag_reg_unref(&v[i]);
    }
    free(v);
    int64_t until = clock_mono_ms() + (wait_ms > 0 ? wait_ms : 0);
    pthread_mutex_lock(&t->lock);
    while (t->count > 0 && clock_mono_ms() < until) {
        struct timespec ts;
        clock_realtime_after(&ts, 100);
        pthread_cond_timedwait(&t->changed, &t->lock, &ts);
    }
    bool empty = t->count == 0;
    pthread_mutex_unlock(&t->lock);
    if (!empty) /* entries still held elsewhere: leak the table, not crash */
        return;
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

bool
ag_reg_set_running(ag_reg_entry_t *e)
{
    pthread_mutex_lock(&e->t->lock);
    bool ok = e->state == AG_REG_STARTING;
    if (ok)
        e->state = AG_REG_RUNNING;
    pthread_mutex_unlock(&e->t->lock);
    return ok;
}

bool
ag_reg_set_deadline(ag_reg_entry_t *e, int64_t deadline_ms)
{
    pthread_mutex_lock(&e->t->lock);
    bool ok = e->state != AG_REG_ENDED;
    if (ok)
        e->deadline_ms = deadline_ms;
    pthread_mutex_unlock(&e->t->lock);
    return ok;
}

const char *
ag_reg_id(const ag_reg_entry_t *e)
{
    return e->id;
}

const char *
ag_reg_owner(const ag_reg_entry_t *e)
{
    return e->owner;
}

ag_reg_state_t
ag_reg_state(ag_reg_entry_t *e)
{
    pthread_mutex_lock(&e->t->lock);
    ag_reg_state_t s = e->state;
    pthread_mutex_unlock(&e->t->lock);
    return s;
}

int64_t
ag_reg_deadline(ag_reg_entry_t *e)
{
    pthread_mutex_lock(&e->t->lock);
    int64_t d = e->deadline_ms;
    pthread_mutex_unlock(&e->t->lock);
    return d;
}

void *
ag_reg_payload(const ag_reg_entry_t *e)
{
    return e->payload;
}

const char *
ag_reg_why(ag_reg_entry_t *e)
{
    pthread_mutex_lock(&e->t->lock);
    const char *w = e->why;
    pthread_mutex_unlock(&e->t->lock);
    return w;
}
