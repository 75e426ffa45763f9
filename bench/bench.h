/*
 * bench.h: the few helpers the C benchmark programs share. Header-only
 * (static inline) because every bench/NAME.c becomes its own program.
 *
 * Every program prints ONE JSON object on stdout (the driver, bench.py,
 * reads it) and diagnostics on stderr. A failure prints
 * {"error": "..."} and exits with the err_t code.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include "common/err.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* CPU time (user, system) in microseconds of `who`: RUSAGE_SELF (the
 * whole process, libzmq's I/O thread included) or RUSAGE_THREAD. */
static inline void
bench_cpu_us_of(int who, int64_t *user, int64_t *sys)
{
    struct rusage ru = {0};
    if (getrusage(who, &ru) != 0)
        memset(&ru, 0, sizeof ru);
    *user = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
    *sys = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
}

/* The whole process's CPU time, all threads. */
static inline void
bench_cpu_us(int64_t *user, int64_t *sys)
{
    bench_cpu_us_of(RUSAGE_SELF, user, sys);
}

/* Print `obj` (stolen) as one line of JSON on stdout. */
static inline void
bench_emit(json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    if (text)
        printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(obj);
}

/* Report `err` as {"error": ...} and return its code as the exit status. */
static inline int
bench_fail(const char *what, const err_t *err)
{
    fprintf(stderr, "%s: %s\n", what, err->text);
    json_t *o = json_object();
    json_object_set_new(o, "error", json_sprintf("%s: %s", what, err->text));
    bench_emit(o);
    return err->code ? err->code : 1;
}

/* A positive integer argument, or `fallback` when absent/invalid. */
static inline long
bench_int_arg(const char *s, long fallback)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    return s && *end == '\0' && v > 0 ? v : fallback;
}

#endif
