/*
 * kb_pool: N pre-started sandboxed kernels (kb_warm.h) for one kernelspec
 * and one sandbox policy, handed out one per session.
 *
 * Single-threaded: nothing happens in the background by itself. Call
 * kb_pool_poll() from the owner's loop (it notices finished warm-ups,
 * drops dead kernels and starts new ones up to `size`, at most
 * `max_starting` at once so a refill does not starve running sessions of
 * CPU); kb_pool_take() schedules the refill 300 ms later, so the new
 * session's first cells do not compete with it. After a warm-up failure the
 * next start waits (1 s, doubling up to 60 s) so a broken kernel does not spin.
 *
 * A warm-up still not ready after warmup_timeout_ms is abandoned (its box
 * killed, a warning logged, counted in `abandoned`) and retried after the
 * same back-off. After max_retries abandoned warm-ups in a row the pool
 * pauses: it starts no more warm-ups (sessions start cold) until the next
 * take that finds nothing ready, which re-arms it. A warm-up that becomes
 * ready resets the count.
 *
 * Demand: every miss raises the pool's target by one (`target`, from
 * `size` up to `max_size`, a memory cap), so a pool that drains under
 * back-to-back sessions grows until it keeps up; after GROW_DECAY_MS with
 * no miss the target falls back one step at a time and idle kernels above
 * it are ended. A refill after a take is delayed (REFILL_DELAY_MS, so the
 * new session's first cells do not compete with it) only while at least
 * half the target is still ready, and later takes never push that delay
 * further: back-to-back sessions cannot starve the refill.
 *
 * kb_pool_take() never waits: it hands out a READY kernel or is a miss at
 * once, and the caller starts a cold kernel. kb_pool_take_wait() is the
 * same but, when nothing is ready and a warm-up is in progress, may tell
 * the caller to retry (kb_pool_take_again) for up to *wait_ms: the
 * warm-ups' median time (what a cold start costs anyway), at most
 * TAKE_WAIT_MAX_MS, so a stalled warm-up costs at most one more cold start.
 * Counters: `misses` = takes that found nothing ready at once; of those,
 * `waited` got a warm-up that finished while they waited, `cold` went
 * away to start cold.
 *
 * INVARIANT: a kernel leaves the pool exactly once. kb_pool_take() removes
 * it before returning it, and the pool keeps no reference to it.
 */
#ifndef KERNEL_BRIDGE_POOL_KB_POOL_H
#define KERNEL_BRIDGE_POOL_KB_POOL_H

#include "common/err.h"
#include "kernel-bridge/launch/kb_launcher.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "sandbox/sb_policy.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct kb_pool kb_pool_t;

typedef struct kb_pool_opts {
    const char *kernel_name;   /* NULL = "python3" */
    const sb_policy_t *policy; /* borrowed, copied; NULL = default */
    unsigned size;             /* kernels kept ready; 0 = 2 */
    unsigned max_size;         /* misses may grow the target up to this; 0 =
                                  auto: 4 x size, at most what a quarter of
                                  MemAvailable holds (KB_POOL_KERNEL_MB
                                  each, _FORKED_MB from a factory), at least
                                  size */
    unsigned max_starting;     /* warm-ups at once; 0 = the CPUs online,
                                  at least 2 */
    const char *preload;       /* run at warm-up, or NULL (copied) */
    kb_factory_t *factory;     /* borrowed: fork kernels from it (shared
                                  pages; preload is then the factory's), or
                                  NULL: a fresh interpreter per kernel */
    int warmup_timeout_ms;     /* abandon a warm-up after this; 0 = 60 s */
    unsigned max_retries;      /* abandoned in a row before pausing; 0 = 3 */
} kb_pool_opts_t;

/* Warm-up times (start to ready) are kept for the last KB_POOL_WARMUP_WINDOW
 * warm-ups; p50 is over those. */
#define KB_POOL_WARMUP_WINDOW 32
/* What one idle pooled kernel is reckoned to use for the memory cap (PSS
 * of an ipykernel with numpy/pandas imported; docs/performance.md). */
#define KB_POOL_KERNEL_MB 110
#define KB_POOL_FORKED_MB 40

typedef struct kb_pool_stats {
    unsigned ready;          /* kernels waiting for a session */
    unsigned starting;       /* warm-ups in progress */
    unsigned long hits;      /* takes served from the pool */
    unsigned target;         /* kernels the pool now aims to keep (size +
                                  growth from misses) */
    unsigned max_size;       /* the most the target may grow to */
    unsigned long misses;    /* takes that found nothing ready or no match */
    unsigned long waited;    /* misses served by a warm-up that finished
                                while they waited (kb_pool_take_wait) */
    unsigned long cold;      /* misses sent away to start a cold kernel */
    unsigned long started;   /* warm-ups begun */
    unsigned long failed;    /* warm-ups that failed or kernels that died
                                (abandoned ones included) */
    unsigned long abandoned; /* warm-ups killed for taking too long */
    bool paused;             /* too many abandoned in a row: not warming
                                until the next take */
    unsigned long warmups;   /* warm-ups that became ready */
    int warmup_last_ms;      /* the most recent one's time, or -1 */
    int warmup_p50_ms;       /* median of the last KB_POOL_WARMUP_WINDOW, or
                                -1 */
    int warmup_max_ms;       /* the longest since the pool was created, or
                                -1 */
    const char *last_error;  /* borrowed; "" when none */
} kb_pool_stats_t;

/* A pool; nothing starts until the first kb_pool_poll()/kb_pool_take(). */
kb_pool_t *kb_pool_new(const kb_pool_opts_t *o, err_t *err);
/* Kills every pooled kernel. Accepts NULL; sets *p to NULL. */
void kb_pool_destroy(kb_pool_t **p);

/* Progress warm-ups for up to timeout_ms (0 = just look), then refill. */
void kb_pool_poll(kb_pool_t *p, int timeout_ms);
/* fds worth polling for kb_pool_poll (control sockets and pidfds of
 * kernels being warmed); returns how many were written (<= max). */
size_t kb_pool_fds(const kb_pool_t *p, int *fds, size_t max);
/* Milliseconds until the pool wants kb_pool_poll() again even without fd
 * activity (a delayed refill), or -1 for "only on fd activity". */
int kb_pool_next_ms(const kb_pool_t *p);

/* Does this pool serve `kernel_name` (NULL = "python3") under `policy`
 * (NULL = default)? keep_workspace_dir is ignored (the taker handles it). */
bool kb_pool_matches(const kb_pool_t *p, const char *kernel_name,
                     const sb_policy_t *policy);

/* A ready kernel as a launcher for kb_kernel_start() (caller owns it), or
 * NULL with ERR_KERNEL when none is ready or the request does not match:
 * a miss, counted; the caller starts a cold kernel instead. */
kb_launcher_t *kb_pool_take(kb_pool_t *p, const char *kernel_name,
                            const sb_policy_t *policy, err_t *err);

/* kb_pool_take, except that a miss while a warm-up is in progress may
 * return NULL with *wait_ms > 0 (else 0): the caller then calls
 * kb_pool_take_again() after kb_pool_poll() until it gets a kernel or
 * wait_ms have passed. */
kb_launcher_t *kb_pool_take_wait(kb_pool_t *p, const char *kernel_name,
                                 const sb_policy_t *policy, int *wait_ms,
                                 err_t *err);
/* Retry a waiting take: a ready kernel (counted in `waited`), or NULL;
 * with `last` (the wait is over) a NULL is counted in `cold`. */
kb_launcher_t *kb_pool_take_again(kb_pool_t *p, bool last, err_t *err);

void kb_pool_stats(const kb_pool_t *p, kb_pool_stats_t *out);

#endif
