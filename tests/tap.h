/*
 * tap.h: a tiny TAP producer for the C unit, integration and security tests.
 *
 *   ok(cond, "what must hold", ...)   one line per guarantee
 *   is_int(got, want, "name", ...)    with a diagnostic on mismatch
 *   is_str(got, want, "name", ...)
 *   skip("why", ...)                  counts as a pass, says why
 *   return done_testing();            prints "1..N" and "N passed, N failed"
 *
 * Header-only: every test program is one translation unit that includes it.
 */
#ifndef TESTS_TAP_H
#define TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_run_ = 0, tap_failed_ = 0, tap_skipped_ = 0;

__attribute__((format(printf, 2, 3))) static inline int
ok(int cond, const char *fmt, ...)
{
    va_list ap;
    tap_run_++;
    if (!cond)
        tap_failed_++;
    printf("%s %d - ", cond ? "ok" : "not ok", tap_run_);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return cond;
}

__attribute__((format(printf, 1, 2))) static inline void
diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

#define is_int(got, want, ...)                                                 \
    do {                                                                       \
        long long g_ = (long long)(got), w_ = (long long)(want);               \
        if (!ok(g_ == w_, __VA_ARGS__))                                        \
            diag("  got: %lld, expected: %lld", g_, w_);                       \
    } while (0)

#define is_str(got, want, ...)                                                 \
    do {                                                                       \
        const char *g_ = (got), *w_ = (want);                                  \
        int same_ = (g_ && w_) ? strcmp(g_, w_) == 0 : g_ == w_;               \
        if (!ok(same_, __VA_ARGS__))                                           \
            diag("  got: '%s', expected: '%s'", g_ ? g_ : "(null)",            \
                 w_ ? w_ : "(null)");                                          \
    } while (0)

__attribute__((format(printf, 1, 2))) static inline void
skip(const char *fmt, ...)
{
    va_list ap;
    tap_run_++;
    tap_skipped_++;
    printf("ok %d # skip ", tap_run_);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* ENGINE=gvisor (or namespaces) runs a suite's boxes under that engine:
 * it becomes JUPYTER_AGENT_ENGINE, the default every box's policy reads
 * (tests/tap.sh does the same for the shell suites). Returns the name
 * ("namespaces" when ENGINE is unset). */
static inline const char *
tap_engine(void)
{
    const char *e = getenv("ENGINE");
    if (!e || !*e)
        return "namespaces";
    setenv("JUPYTER_AGENT_ENGINE", e, 1);
    return e;
}

static inline int
done_testing(void)
{
    printf("1..%d\n", tap_run_);
    printf("%d passed, %d failed", tap_run_ - tap_failed_ - tap_skipped_,
           tap_failed_);
    if (tap_skipped_)
        printf(", %d skipped", tap_skipped_);
    printf("\n");
    fflush(stdout);
    return tap_failed_ ? 1 : 0;
}

#endif
