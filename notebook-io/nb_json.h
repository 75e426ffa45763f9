/*
 * nb_json: JSON text byte-identical to Python's
 *
 *     json.dumps(v, indent=1, sort_keys=True, ensure_ascii=False,
 *                separators=(",", ": "))
 *
 * which is what nbformat writes. This is the one place that knows Python's
 * layout (one space per level, "[]" and "{}" for empty containers), its
 * string escapes (only '"', '\\' and control characters; \b \f \n \r \t short,
 * the rest as lowercase \u00XX; '/', DEL and all non-ASCII written raw), and
 * float repr (shortest round-trip digits, "1.0", "1e-05", "1e+16").
 *
 * A role callback lets a caller change how particular members are written
 * without copying the document: write a string as a list of lines
 * (Python's str.splitlines(True)), or skip a member. Role 0 (NB_JSON_PLAIN)
 * means "plain all the way down", so the callback is not consulted below it.
 *
 * Nothing here does I/O or keeps state; every function is reentrant.
 */
#ifndef NOTEBOOK_IO_NB_JSON_H
#define NOTEBOOK_IO_NB_JSON_H

#include "common/buf.h"

#include <jansson.h>
#include <stddef.h>

enum {
    NB_JSON_PLAIN = 0,  /* write as is; children are plain too */
    NB_JSON_LINES = -1, /* a string: write as a list of its lines */
    NB_JSON_SKIP = -2   /* leave this object member out */
};

/* Decide the role of `child`, found under `key` in object `parent` (or at
 * some index of array `parent`, with key NULL), whose own role is
 * `parent_role` (> 0). Return NB_JSON_PLAIN, NB_JSON_LINES (honoured only for
 * strings), NB_JSON_SKIP (honoured only in objects) or a caller-defined role
 * > 0 for which the callback will be asked about the child's children. */
typedef int (*nb_json_role_fn)(int parent_role, const json_t *parent,
                               const char *key, const json_t *child);

/* Append the text of `v` (borrowed) to `out`, starting at nesting `depth`
 * (0 for a document), with `role` and `fn` as above (fn may be NULL when
 * role is NB_JSON_PLAIN). No trailing newline. Returns 0, or -1 if `out`'s
 * size cap was reached (out then holds a truncated text). */
int nb_json_dump(buf_t *out, const json_t *v, int depth, int role,
                 nb_json_role_fn fn);

/* json.dumps of `v` as above; caller frees. `len` (optional) gets the length
 * (the text may contain no NUL, but a string value may: it is escaped). */
char *nb_json_dumps(const json_t *v, size_t *len);

/* Python's repr(float(d)): "0.1", "1.0", "-0.0", "1e-05", "1.5e+300",
 * "NaN", "Infinity", "-Infinity" (as json.dumps writes them). */
enum { NB_JSON_FLOAT_SIZE = 40 };
void nb_json_repr_float(double d, char out[NB_JSON_FLOAT_SIZE]);

/* Python str.splitlines(True) over valid UTF-8: return the end (exclusive,
 * terminator included) of the line that starts at `pos` < `len`. Line
 * terminators: \n, \r, \r\n, \v, \f, \x1c, \x1d, \x1e, U+0085, U+2028,
 * U+2029. */
size_t nb_json_line_end(const char *s, size_t len, size_t pos);

/* Append `s` (`len` bytes, valid UTF-8) as a quoted JSON string. A lone
 * UTF-16 surrogate held as its 3-byte generalised UTF-8 form (ED A0-BF xx,
 * see nb_json_loadb) is written as a \udxxx escape. */
int nb_json_dump_string(buf_t *out, const char *s, size_t len);

/* Python's json.loads accepts what strict JSON (and jansson) refuses;
 * nb_json_loadb reads it too, so that what nbformat reads, we read:
 *   - integers past 64 bits and NaN, Infinity, -Infinity (and a float
 *     literal past the double range, which Python reads as infinity) become
 *     "raw" strings: NB_JSON_RAW_MARK followed by the literal as Python
 *     writes it back; nb_json_dump writes them unquoted, byte for byte;
 *   - a lone surrogate escape (\ud800 without its pair) inside a string
 *     value becomes the surrogate's 3-byte generalised UTF-8 form (not
 *     valid UTF-8, as jansson's _nocheck strings allow), written back as
 *     the same escape; in an object key it becomes U+FFFD.
 * Anything else is as json_loadb(data, len, JSON_ALLOW_NUL, err). Returns
 * a new reference, or NULL with `err` filled.
 * Plain JSON is read by yajl's SAX parser into the same values, several
 * times faster than jansson's parser; whatever that path declines (the
 * cases above, errors) goes through nb_json_loadb_reference. */
#define NB_JSON_RAW_MARK '\xff'
json_t *nb_json_loadb(const char *data, size_t len, json_error_t *err);
/* The same through jansson's parser alone: the reference the yajl path is
 * tested against (tests/fuzz/nb_json.c). */
json_t *nb_json_loadb_reference(const char *data, size_t len,
                                json_error_t *err);

/* The literal text of a raw string (see above), or NULL for any other
 * value. Borrowed. */
const char *nb_json_raw(const json_t *v);

#endif
