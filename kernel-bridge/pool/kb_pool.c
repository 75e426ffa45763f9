/* A pool of warm kernels for one kernelspec and policy. */
#include "kernel-bridge/pool/kb_pool.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_warm.h"

#include <jansson.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define REFILL_DELAY_MS 300
#define WARMUP_TIMEOUT_MS 60000 /* as long as a cold start may take */
#define MAX_RETRIES 3
#define GROW_DECAY_MS 30000  /* a step of growth is kept this long */
#define TAKE_WAIT_MIN_MS 250 /* a waiting take waits at least... */
#define TAKE_WAIT_MAX_MS                                                       \
    5000                        /* ...and at most this (serve's client         \
                                   gives up on a take after 10 s) */
#define TAKE_WAIT_FIRST_MS 2000 /* before any warm-up finished */

struct kb_pool {
    char *kernel_name;      /* owned */
    sb_policy_t policy;     /* owned copy */
    json_t *policy_json;    /* owned: what kb_pool_matches compares */
    char *preload;          /* owned, or NULL */
    kb_factory_t *factory;  /* borrowed, or NULL */
    unsigned size;          /* base target of ready + starting */
    unsigned max_size;      /* the target grows up to this on misses */
    unsigned grow;          /* target = size + grow */
    int64_t last_grow_ms;   /* when grow last changed (decay clock) */
    unsigned max_starting;  /* warm-ups at once */
    kb_warm_t **warm;       /* owned array: starting and ready kernels */
    size_t n;               /* entries in warm */
    int64_t next_start_ms;  /* no new warm-up before this (backoff) */
    int backoff_ms;         /* current backoff after a failure, or 0 */
    int warmup_timeout_ms;  /* abandon a warm-up after this */
    unsigned max_retries;   /* abandoned in a row before pausing */
    unsigned abandoned_row; /* abandoned in a row (reset by a ready one) */
    int times[KB_POOL_WARMUP_WINDOW]; /* ring of warm-up times, ms */
    kb_pool_stats_t st;   /* counters; ready/starting filled on demand */
    char last_error[512]; /* most recent warm-up failure */
};

/* MemAvailable in MiB, or 0 when unknown. */
static unsigned long
s_mem_available_mb(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return 0;
    char line[128];
    unsigned long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lu kB", &kb) == 1)
            break;
    fclose(f);
    return kb / 1024;
}

/* max_size = 0: 4 x size, capped by a quarter of MemAvailable. */
static unsigned
s_auto_max_size(unsigned size, bool forked)
{
    unsigned long want = 4ul * size;
    unsigned long avail = s_mem_available_mb();
    if (avail) {
        unsigned long fits =
            avail / 4 / (forked ? KB_POOL_FORKED_MB : KB_POOL_KERNEL_MB);
        if (fits < want)
            want = fits;
    }
    return want < size ? size : (unsigned)want;
}

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
    p->max_size =
        o && o->max_size ? o->max_size : s_auto_max_size(p->size, p->factory);
    if (p->max_size < p->size)
        p->max_size = p->size;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->max_starting = o && o->max_starting ? o->max_starting
                      : cpus > 2           ? (unsigned)cpus
                                           : 2;
    p->warmup_timeout_ms = o && o->warmup_timeout_ms > 0 ? o->warmup_timeout_ms
                                                         : WARMUP_TIMEOUT_MS;
    p->max_retries = o && o->max_retries ? o->max_retries : MAX_RETRIES;
    p->st.warmup_last_ms = p->st.warmup_p50_ms = p->st.warmup_max_ms = -1;
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

static int
s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A warm-up finished in `ms`: the window, last, p50 and max. */
static void
s_note_warmup(kb_pool_t *p, int64_t ms)
{
    int v = ms > INT32_MAX ? INT32_MAX : (int)ms;
    p->times[p->st.warmups % KB_POOL_WARMUP_WINDOW] = v;
    p->st.warmups++;
    p->st.warmup_last_ms = v;
    if (v > p->st.warmup_max_ms)
        p->st.warmup_max_ms = v;
    size_t n = p->st.warmups < KB_POOL_WARMUP_WINDOW ? p->st.warmups
                                                     : KB_POOL_WARMUP_WINDOW;
    int sorted[KB_POOL_WARMUP_WINDOW];
    memcpy(sorted, p->times, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, s_cmp_int);
    p->st.warmup_p50_ms = sorted[(n - 1) / 2];
}

/* kb_warm_poll, noting a warm-up that just became ready. */
static kb_warm_state_t
s_poll_one(kb_pool_t *p, kb_warm_t *w)
{
    kb_warm_state_t before = kb_warm_state(w);
    kb_warm_state_t s = kb_warm_poll(w, 0);
    if (before == KB_WARM_STARTING && s == KB_WARM_READY) {
        s_note_warmup(p, kb_warm_warmup_ms(w));
        p->backoff_ms = 0; /* it works again */
        p->abandoned_row = 0;
    }
    return s;
}

/* Give up on a warm-up that took too long; pause after too many. */
static void
s_abandon(kb_pool_t *p, size_t i)
{
    char why[256];
    p->st.abandoned++;
    p->abandoned_row++;
    snprintf(why, sizeof why,
             "warm-up of a '%s' kernel abandoned: not ready after %d s "
             "(%u in a row)",
             p->kernel_name, p->warmup_timeout_ms / 1000, p->abandoned_row);
    s_note_failure(p, why);
    if (p->abandoned_row > p->max_retries) {
        p->st.paused = true;
        log_warn("pool: %s; pausing: sessions start cold, and the next one "
                 "re-arms the pool",
                 why);
    } else {
        log_warn("pool: %s; retrying in %d s (retry %u of %u)", why,
                 p->backoff_ms / 1000, p->abandoned_row, p->max_retries);
    }
    kb_warm_destroy(&p->warm[i]);
    s_remove(p, i);
}

static unsigned
s_target(const kb_pool_t *p)
{
    return p->size + p->grow;
}

/* A miss: aim one kernel higher, up to max_size. */
static void
s_grow(kb_pool_t *p)
{
    if (s_target(p) < p->max_size)
        p->grow++;
    p->last_grow_ms = clock_mono_ms();
}

/* Growth no miss asked for lately falls back one step per GROW_DECAY_MS;
 * idle kernels above the target end (the newest first: any will do). */
static void
s_decay(kb_pool_t *p)
{
    if (p->grow && clock_mono_ms() - p->last_grow_ms >= GROW_DECAY_MS) {
        p->grow--;
        p->last_grow_ms = clock_mono_ms();
    }
    unsigned ready, starting;
    s_count(p, &ready, &starting);
    for (size_t i = p->n; i-- > 0 && ready > s_target(p);) {
        if (kb_warm_state(p->warm[i]) != KB_WARM_READY)
            continue;
        kb_warm_destroy(&p->warm[i]);
        s_remove(p, i);
        ready--;
    }
}

/* Drop failed and overdue kernels, then start new ones up to the target. */
static void
s_refill(kb_pool_t *p)
{
    for (size_t i = 0; i < p->n;) {
        kb_warm_state_t s = s_poll_one(p, p->warm[i]);
        if (s == KB_WARM_FAILED) {
            s_note_failure(p, kb_warm_error(p->warm[i]));
            kb_warm_destroy(&p->warm[i]);
            s_remove(p, i);
            continue;
        }
        if (s == KB_WARM_STARTING &&
            kb_warm_age_ms(p->warm[i]) >= p->warmup_timeout_ms) {
            s_abandon(p, i);
            continue;
        }
        i++;
    }
    s_decay(p);
    unsigned ready, starting;
    s_count(p, &ready, &starting);
    while (!p->st.paused && ready + starting < s_target(p) &&
           starting < p->max_starting && clock_mono_ms() >= p->next_start_ms) {
        kb_warm_opts_t wo = {.kernel_name = p->kernel_name,
                             .policy = &p->policy,
                             .preload = p->preload};
        err_t err;
        int64_t t0 = clock_mono_us();
        kb_warm_t *w = p->factory ? kb_warm_fork(p->factory, &wo, &err)
                                  : kb_warm_start(&wo, &err);
        log_debug("pool: starting a warm-up took %lld us (the loop waits "
                  "for it)",
                  (long long)(clock_mono_us() - t0));
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
        if (kb_warm_factory_fd(p->warm[i]) >= 0 && k < max)
            fds[k++] = kb_warm_factory_fd(p->warm[i]);
    }
    return k;
}

/* Milliseconds until the oldest warm-up in progress is overdue, or -1. */
static int
s_next_overdue_ms(const kb_pool_t *p)
{
    int64_t least = -1;
    for (size_t i = 0; i < p->n; i++) {
        if (kb_warm_state(p->warm[i]) != KB_WARM_STARTING)
            continue;
        int64_t left = p->warmup_timeout_ms - kb_warm_age_ms(p->warm[i]);
        if (left < 0)
            left = 0;
        if (least < 0 || left < least)
            least = left;
    }
    return (int)least;
}

/* The sooner of two waits where -1 means "none". */
static int
s_sooner(int a, int b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int
kb_pool_next_ms(const kb_pool_t *p)
{
    unsigned ready, starting;
    s_count(p, &ready, &starting);
    int overdue = s_next_overdue_ms(p);
    if (p->st.paused)
        return overdue;
    if (ready + starting >= s_target(p)) { /* look at idle kernels now and
                                              then; the growth's decay */
        int decay = -1;
        if (p->grow) {
            int64_t d = p->last_grow_ms + GROW_DECAY_MS - clock_mono_ms();
            decay = d > 0 ? (int)d : 0;
        }
        return s_sooner(s_sooner(ready ? 1000 : -1, decay), overdue);
    }
    if (starting >= p->max_starting)
        return overdue; /* the next start waits for a warm-up to finish */
    int64_t wait = p->next_start_ms - clock_mono_ms();
    return s_sooner(wait > 0 ? (int)wait : 0, overdue);
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

/* Hand out a READY kernel (hit bookkeeping: the delayed refill), or NULL
 * with err set. Counts nothing else. */
static kb_launcher_t *
s_take_ready(kb_pool_t *p, err_t *err)
{
    kb_launcher_t *l = NULL;
    size_t i = 0;
    while (i < p->n && !l) {
        if (s_poll_one(p, p->warm[i]) != KB_WARM_READY) {
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
        /* Refill a moment later, so the new session's hand-over and first
         * cells do not compete with a warm-up for the CPU; but only while
         * half the target is still ready, and never pushing a pending
         * delay further (back-to-back takes must not starve the refill). */
        unsigned ready, starting;
        s_count(p, &ready, &starting);
        int64_t now = clock_mono_ms();
        if (ready * 2 >= s_target(p) && p->next_start_ms <= now)
            p->next_start_ms = now + REFILL_DELAY_MS;
    } else {
        err_set(err, ERR_KERNEL, "pool: no warm kernel ready");
    }
    return l;
}

/* A take that found nothing ready: counted, the target grown, a paused
 * pool re-armed. */
static void
s_miss(kb_pool_t *p)
{
    p->st.misses++;
    s_grow(p);
    if (p->st.paused) { /* someone wants kernels again: re-arm */
        p->st.paused = false;
        p->abandoned_row = 0;
        p->backoff_ms = 0;
        p->next_start_ms = clock_mono_ms() + REFILL_DELAY_MS;
        log_info("pool: a session found no warm kernel; warming again");
    }
}

/* How long a miss may wait for a warm-up in progress, or 0. */
static int
s_wait_ms(const kb_pool_t *p)
{
    unsigned ready, starting;
    s_count(p, &ready, &starting);
    if (p->st.paused || starting == 0)
        return 0;
    int w = p->st.warmup_p50_ms >= 0 ? p->st.warmup_p50_ms : TAKE_WAIT_FIRST_MS;
    return w < TAKE_WAIT_MIN_MS   ? TAKE_WAIT_MIN_MS
           : w > TAKE_WAIT_MAX_MS ? TAKE_WAIT_MAX_MS
                                  : w;
}

kb_launcher_t *
kb_pool_take_wait(kb_pool_t *p, const char *kernel_name,
                  const sb_policy_t *policy, int *wait_ms, err_t *err)
{
    if (wait_ms)
        *wait_ms = 0;
    if (!kb_pool_matches(p, kernel_name, policy)) {
        p->st.misses++;
        p->st.cold++;
        err_set(err, ERR_KERNEL,
                "pool: no kernels for this kernel name and sandbox policy");
        return NULL;
    }
    kb_launcher_t *l = s_take_ready(p, err);
    if (l) {
        p->st.hits++;
    } else {
        s_miss(p);
        s_refill(p); /* the grown target starts warming now */
        int w = wait_ms ? s_wait_ms(p) : 0;
        if (w > 0)
            *wait_ms = w;
        else
            p->st.cold++;
        return NULL;
    }
    s_refill(p);
    return l;
}

kb_launcher_t *
kb_pool_take(kb_pool_t *p, const char *kernel_name, const sb_policy_t *policy,
             err_t *err)
{
    return kb_pool_take_wait(p, kernel_name, policy, NULL, err);
}

kb_launcher_t *
kb_pool_take_again(kb_pool_t *p, bool last, err_t *err)
{
    kb_launcher_t *l = s_take_ready(p, err);
    if (l)
        p->st.waited++;
    else if (last)
        p->st.cold++;
    s_refill(p);
    return l;
}

void
kb_pool_stats(const kb_pool_t *p, kb_pool_stats_t *out)
{
    *out = p->st;
    s_count(p, &out->ready, &out->starting);
    out->target = s_target(p);
    out->max_size = p->max_size;
    out->last_error = p->last_error;
}
