/*
 * utf8: decoding and cutting UTF-8 text without splitting a character.
 *
 * Valid means RFC 3629: no overlong forms, no surrogates (U+D800..DFFF),
 * nothing above U+10FFFF.
 */
#ifndef COMMON_UTF8_H
#define COMMON_UTF8_H

#include <stddef.h>

/* Decode the code point at s[*i] (len bytes in all, *i < len) and advance
 * *i past it. An invalid or truncated sequence yields -1 - byte (the byte
 * as Python's surrogateescape sees it) and advances by one byte. */
long utf8_decode(const unsigned char *s, size_t len, size_t *i);

/* Length of the valid sequence at u[0..n) (n > 0), or 0 if invalid. */
size_t utf8_seq_len(const unsigned char *u, size_t n);

/* Move `i` back to the first byte of the character that s[i] belongs to
 * (s[i] must be readable; it may be the terminating NUL). */
size_t utf8_char_start(const char *s, size_t i);

/* Length of the longest prefix of s[0..len) of at most `max` bytes that
 * does not end inside a character. */
size_t utf8_cut(const char *s, size_t len, size_t max);

#endif
