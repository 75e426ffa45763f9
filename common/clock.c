#include "clock.h"

#include <stdio.h>
#include <time.h>

int64_t
clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
clock_mono_ms(void)
{
    return clock_mono_us() / 1000;
}

static void
s_after(clockid_t clock, struct timespec *ts, int ms)
{
    clock_gettime(clock, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void
clock_realtime_after(struct timespec *ts, int ms)
{
    s_after(CLOCK_REALTIME, ts, ms);
}

void
clock_mono_after(struct timespec *ts, int ms)
{
    s_after(CLOCK_MONOTONIC, ts, ms);
}

void
clock_iso8601_now(char *out, size_t size)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}
