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
 * A take never waits: it hands out a READY kernel or is a miss at once,
 * even while warm-ups are starting, and the caller starts a cold kernel.
 * Waiting would pay off only for a warm-up about to finish, and the pool
 * cannot tell one from a warm-up that is stalled (the ones that overrun
 * are exactly those under load); a miss costs at most a cold start, a wait
 * on a stalled warm-up up to warmup_timeout_ms.
 *
 * INVARIANT: a kernel leaves the pool exactly once. kb_pool_take() removes
 * it before returning it, and the pool keeps no reference to it.
 */
#ifndef KERNEL_BRIDGE_POOL_KB_POOL_H
#define KERNEL_BRIDGE_POOL_KB_POOL_H

#include "common/err.h"
#include "kernel-bridge/kb_launcher.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "sandbox/sb_policy.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct kb_pool kb_pool_t;

typedef struct kb_pool_opts {
    const char *kernel_name;   /* NULL = "python3" */
    const sb_policy_t *policy; /* borrowed, copied; NULL = default */
    unsigned size;             /* kernels kept ready; 0 = 2 */
    unsigned max_starting;     /* warm-ups at once; 0 = 2 */
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

typedef struct kb_pool_stats {
    unsigned ready;          /* kernels waiting for a session */
    unsigned starting;       /* warm-ups in progress */
    unsigned long hits;      /* takes served from the pool */
    unsigned long misses;    /* takes that found nothing ready or no match */
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

void kb_pool_stats(const kb_pool_t *p, kb_pool_stats_t *out);

#endif
