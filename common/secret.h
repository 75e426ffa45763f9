/*
 * secret: wiping secrets (API keys, tokens, HMAC keys) before their memory
 * is freed. A plain memset before free is a dead store the compiler may
 * drop; sodium_memzero is not. tests/unit/secret_wipes.sh fails on a plain
 * memset of a key, token or auth string in the library.
 */
#ifndef COMMON_SECRET_H
#define COMMON_SECRET_H

/* Wipe the NUL-terminated `s` (NULL allowed); the pointer stays valid. */
void secret_wipe(char *s);
/* Wipe and free the NUL-terminated `s` (NULL allowed). */
void secret_free(char *s);

#endif
