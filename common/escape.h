/*
 * escape: text from a box or a notebook made safe to print on a terminal.
 *
 * Whatever a sandboxed program or a notebook names (files, prompts,
 * kernelspecs) may hold terminal escape sequences (OSC 52 writes the
 * clipboard, OSC 0 the title), forged newlines or invalid UTF-8. Before we
 * print such text ourselves, every C0 control, DEL, C1 control (U+0080 to
 * U+009F), bidirectional override (U+202A-U+202E, U+2066-U+2069) and every
 * byte of invalid UTF-8 becomes a visible escape: \n \t \r \e for the
 * usual ones, \xNN for the rest (bytes of a C1 or bidi character each as
 * \xNN). Valid printable UTF-8 passes unchanged.
 * The one implementation: everything the tool prints that came from a box
 * or a notebook goes through here.
 */
#ifndef COMMON_ESCAPE_H
#define COMMON_ESCAPE_H

#include "common/buf.h"

#include <stddef.h>

enum {
    ESC_NAME = 0,       /* a name: every control escaped, '\\' too */
    ESC_KEEP_LINES = 1, /* prose (a prompt): keep '\n' and '\t' as they are,
                           and '\\' unescaped */
};

/* Append `len` bytes of `s`, escaped, to `b`. */
void esc_append(buf_t *b, const char *s, size_t len, int mode);
/* `s` (NUL-terminated) escaped, as a new string (caller frees). */
char *esc_dup(const char *s, int mode);

#endif
