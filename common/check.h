/*
 * check: NEVER() and ALWAYS() for invariants of our own state machines
 * (kb_zmtp's decoder state, ...), as SQLite uses them. Not for hostile
 * input: what a kernel or a server may send is handled as an error, always.
 *
 *     if (NEVER(z->state != KB_ZMTP_OPEN))
 *         return s_broken(z, "decoder in state %d", z->state);
 *
 * In a release build NEVER(x) is (x): an impossible state is still handled,
 * as an error, never left to undefined behaviour. In a sanitizer build
 * (make asan: the Makefile defines JA_NEVER_ABORTS when SAN is set) a
 * NEVER that holds, or an ALWAYS that does not, prints its file and line
 * and aborts, so a test that reaches one fails loudly.
 */
#ifndef COMMON_CHECK_H
#define COMMON_CHECK_H

#include <stdbool.h>

#ifdef JA_NEVER_ABORTS
void check_failed(const char *file, int line, const char *what)
    __attribute__((noreturn));
#define NEVER(x)                                                               \
    ((x) ? (check_failed(__FILE__, __LINE__, "NEVER(" #x ")"), true) : false)
#define ALWAYS(x)                                                              \
    ((x) ? true : (check_failed(__FILE__, __LINE__, "ALWAYS(" #x ")"), false))
#else
#define NEVER(x) ((x) ? true : false)
#define ALWAYS(x) ((x) ? true : false)
#endif

#endif
