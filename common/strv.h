/*
 * strv: NULL-terminated arrays of owned strings (argv, envp, name lists).
 *
 * An empty list may be NULL or a one-element array holding NULL; every
 * string in a list is owned by it, and the list is freed with strv_free().
 */
#ifndef COMMON_STRV_H
#define COMMON_STRV_H

#include <stddef.h>

/* Free every string of `v`, then `v`; NULL is fine. */
void strv_free(char **v);
/* Append `s` (ownership moves to the list) to `*v`, which holds `*n`
 * strings, keeping it NULL-terminated; `*n` grows by one. Never fails. */
void strv_push(char ***v, size_t *n, char *s);
/* Number of strings before the NULL; 0 for NULL. */
size_t strv_len(char *const *v);

#endif
