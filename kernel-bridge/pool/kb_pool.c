/* A pool of warm kernels for one kernelspec and policy. */
#include "kernel-bridge/pool/kb_pool.h"

#include "common/clock.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_warm.h"

#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define REFILL_DELAY_MS 300

struct kb_pool {
    char *kernel_name;     /* owned */
    sb_policy_t policy;    /* owned copy */
    json_t *policy_json;   /* owned: what kb_pool_matches compares */
    char *preload;         /* owned, or NULL */
    kb_factory_t *factory; /* borrowed, or NULL */
    unsigned size;         /* target of ready + starting */
    unsigned max_starting; /* warm-ups at once */
    kb_warm_t **warm;      /* owned array: starting and ready kernels */
    size_t n;              /* entries in warm */
    int64_t next_start_ms; /* no new warm-up before this (backoff) */
    int backoff_ms;        /* current backoff after a failure, or 0 */
    kb_pool_stats_t st;    /* counters; ready/starting filled on demand */
    char last_error[512];  /* most recent warm-up failure */
};

kb_pool_t *
kb_pool_new(const kb_pool_opts_t *o, err_t *err)
{
    (void)err;
    kb_pool_t *p = xcalloc(1, sizeof *p);
    p->kernel_name = xstrdup(o && o->kernel_name ? o->kernel_name : "python3");
    if (o && o->policy)
        sb_policy_copy(&p->policy, o->policy);
    else
        sb_policy_init_default(&p->policy);
    p->policy_json = sb_policy_to_json(&p->policy);
    p->preload = o && o->preload && *o->preload ? xstrdup(o->preload) : NULL;
    p->factory = o ? o->factory : NULL;
    p->size = o && o->size ? o->size : 2;
    p->max_starting = o && o->max_starting ? o->max_starting : 2;
    return p;
}

void
kb_pool_destroy(kb_pool_t **pp)
{
    if (!pp || !*pp)
        return;
    kb_pool_t *p = *pp;
    for (size_t i = 0; i < p->n; i++)
        kb_warm_destroy(&p->warm[i]);
    free(p->warm);
    free(p->kernel_name);
    free(p->preload);
    json_decref(p->policy_json);
    sb_policy_release(&p->policy);
    free(p);
    *pp = NULL;
}

static void
s_remove(kb_pool_t *p, size_t i)
{
    p->warm[i] = p->warm[--p->n];
}

static void
s_count(const kb_pool_t *p, unsigned *ready, unsigned *starting)
{
    *ready = *starting = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (kb_warm_state(p->warm[i]) == KB_WARM_READY)
            (*ready)++;
        else if (kb_warm_state(p->warm[i]) == KB_WARM_STARTING)
            (*starting)++;
    }
}

static void
s_note_failure(kb_pool_t *p, const char *why)
{
    p->st.failed++;
    snprintf(p->last_error, sizeof p->last_error, "%s", why);
    p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (p->backoff_ms > BACKOFF_MAX_MS)
        p->backoff_ms = BACKOFF_MAX_MS;
    p->next_start_ms = clock_mono_ms() + p->backoff_ms;
}

/* Drop failed kernels, then start new ones up to the target. */
static void
s_refill(kb_pool_t *p)
{
    for (size_t i = 0; i < p->n;) {
        kb_warm_state_t s = kb_warm_poll(p->warm[i], 0);
        if (s == KB_WARM_FAILED) {
            s_note_failure(p, kb_warm_error(p->warm[i]));
            kb_warm_destroy(&p->warm[i]);
            s_remove(p, i);
            continue;
        }
        if (s == KB_WARM_READY)
            p->backoff_ms = 0; /* it works again */
        i++;
    }
    unsigned ready, starting;
    s_count(p, &ready, &starting);
    while (ready + starting < p->size && starting < p->max_starting &&
           clock_mono_ms() >= p->next_start_ms) {
        kb_warm_opts_t wo = {.kernel_name = p->kernel_name,
                             .policy = &p->policy,
                             .preload = p->preload};
        err_t err;
        kb_warm_t *w = p->factory ? kb_warm_fork(p->factory, &wo, &err)
                                  : kb_warm_start(&wo, &err);
        p->st.started++;
        if (!w) {
            s_note_failure(p, err.text);
            return;
        }
        p->warm = xrealloc(p->warm, (p->n + 1) * sizeof *p->warm);
        p->warm[p->n++] = w;
        starting++;
    }
}

void
kb_pool_poll(kb_pool_t *p, int timeout_ms)
{
    int64_t deadline = clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        s_refill(p);
        int fds[64];
        size_t nfds = kb_pool_fds(p, fds, 64);
        int left = (int)(deadline - clock_mono_ms());
        int next = kb_pool_next_ms(p);
        if (left <= 0 || (!nfds && (next < 0 || next >= left)))
            return;
        /* Wait for news from a warm-up, or until a delayed refill. */
        struct pollfd pf[64];
        for (size_t i = 0; i < nfds; i++)
            pf[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        int wait = next >= 0 && next < left ? next : left;
        if (poll(pf, nfds, wait) == 0 && wait == left)
            return;
    }
}

size_t
kb_pool_fds(const kb_pool_t *p, int *fds, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n && k + 2 <= max; i++) {
        if (kb_warm_state(p->warm[i]) != KB_WARM_STARTING)
            continue;
        if (kb_warm_ctl_fd(p->warm[i]) >= 0)
            fds[k++] = kb_warm_ctl_fd(p->warm[i]);
        if (kb_warm_pidfd(p->warm[i]) >= 0)
            fds[k++] = kb_warm_pidfd(p->warm[i]);
    }
    return k;
}

int
kb_pool_next_ms(const kb_pool_t *p)
{
    unsigned ready, starting;
    s_count(p, &ready, &starting);
    if (ready + starting >= p->size)
        return ready ? 1000 : -1; /* look at idle kernels now and then */
    if (starting >= p->max_starting)
        return -1; /* the next start waits for a warm-up to finish */
    int64_t wait = p->next_start_ms - clock_mono_ms();
    return wait > 0 ? (int)wait : 0;
}

bool
kb_pool_matches(const kb_pool_t *p, const char *kernel_name,
                const sb_policy_t *policy)
{
    if (strcasecmp(kernel_name ? kernel_name : "python3", p->kernel_name))
        return false;
    sb_policy_t defaults;
    if (!policy) {
        sb_policy_init_default(&defaults);
        policy = &defaults;
    }
    json_t *j = sb_policy_to_json(policy);
    bool same = json_equal(j, p->policy_json);
    json_decref(j);
    if (policy == &defaults)
        sb_policy_release(&defaults);
    return same;
}

kb_launcher_t *
kb_pool_take(kb_pool_t *p, const char *kernel_name, const sb_policy_t *policy,
             err_t *err)
{
    kb_launcher_t *l = NULL;
    if (!kb_pool_matches(p, kernel_name, policy)) {
        p->st.misses++;
        err_set(err, ERR_KERNEL,
                "pool: no kernels for this kernel name and sandbox policy");
        return NULL;
    }
    size_t i = 0;
    while (i < p->n && !l) {
        if (kb_warm_poll(p->warm[i], 0) != KB_WARM_READY) {
            i++;
            continue;
        }
        kb_warm_t *w = p->warm[i];
        s_remove(p, i); /* out of the pool before anyone can see it; the
                           slot now holds another kernel */
        l = kb_warm_launcher(&w, err);
        if (!l) {
            s_note_failure(p, kb_warm_error(w));
            kb_warm_destroy(&w);
        }
    }
    if (l) {
        p->st.hits++;
        /* Refill a moment later: the new session's hand-over and first
         * cells should not compete with a warm-up for the CPU. */
        int64_t later = clock_mono_ms() + REFILL_DELAY_MS;
        if (p->next_start_ms < later)
            p->next_start_ms = later;
    }
    if (!l) {
        p->st.misses++;
        err_set(err, ERR_KERNEL, "pool: no warm kernel ready");
    }
    s_refill(p);
    return l;
}

void
kb_pool_stats(const kb_pool_t *p, kb_pool_stats_t *out)
{
    *out = p->st;
    s_count(p, &out->ready, &out->starting);
    out->last_error = p->last_error;
}
