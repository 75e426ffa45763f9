/*
 * clock: monotonic time for deadlines, wall time for timestamps.
 */
#ifndef COMMON_CLOCK_H
#define COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Milliseconds on CLOCK_MONOTONIC (for deadlines and durations). */
int64_t clock_mono_ms(void);
/* Microseconds on CLOCK_MONOTONIC. */
int64_t clock_mono_us(void);
/* CLOCK_REALTIME `ms` milliseconds from now, for pthread_cond_timedwait
 * (whose default clock that is). */
struct timespec;
void clock_realtime_after(struct timespec *ts, int ms);

/* The same on CLOCK_MONOTONIC, for a condition variable whose clock is
 * set to it (pthread_condattr_setclock). */
void clock_mono_after(struct timespec *ts, int ms);
/* UTC now as ISO 8601 with microseconds and "Z", as Jupyter writes dates:
 * "2026-11-29T17:47:02.123456Z". `out` must hold at least 32 bytes. */
void clock_iso8601_now(char *out, size_t size);

#endif
