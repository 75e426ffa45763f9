/*
 * nb_json reading: notebooks as Python's json module reads them (NaN,
 * Infinity, lone surrogates), fast through yajl when the input is plain.
 * nb_json.c writes them.
 */
#include "notebook-io/nb_json.h"

#include "common/utf8.h"
#include "common/xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* ---- lenient reading -------------------------------------------------- */

/* The rewrite nb_json_loadb hands to jansson: every literal jansson would
 * refuse becomes a marked string, "\u0000" + nonce + 'R' + literal, and
 * every lone surrogate escape in a string value "\u0000" + nonce + 'S' +
 * its 4 hex digits. The nonce occurs nowhere in the input.
 *
 * Almost every notebook needs no rewrite, so the walk first runs dry
 * (`copy` 0: nothing is written, it stops at the first rewrite needed) and
 * jansson reads the input itself; only when a rewrite is needed does it
 * run again, copying the unchanged runs of bytes whole. */
enum { NONCE_LEN = 16 };

typedef struct s_lenient {
    const char *in;
    size_t len, pos;
    int copy;       /* 1: write the rewrite to `out`; 0: dry run */
    int rewrite;    /* a rewrite is needed (the dry run stops there) */
    size_t emitted; /* in[0..emitted) is accounted for in `out` */
    buf_t out;
    char nonce[NONCE_LEN + 1];
    size_t marks; /* markers written */
} s_lenient_t;

/* Copy the input up to `upto` (exclusive) to `out`, unchanged. */
static void
s_flush(s_lenient_t *l, size_t upto)
{
    if (l->copy && upto > l->emitted)
        buf_append(&l->out, l->in + l->emitted, upto - l->emitted);
    if (upto > l->emitted)
        l->emitted = upto;
}

/* Replace in[l->pos .. l->pos + skip) by `text` (a marker of `kind`, or
 * with kind 0 the text itself). */
static void
s_replace(s_lenient_t *l, char kind, const char *text, size_t n, size_t skip)
{
    l->rewrite = 1;
    if (!l->copy)
        return;
    s_flush(l, l->pos);
    if (kind == 'R') /* a value of its own: a whole string */
        buf_append(&l->out, "\"", 1);
    if (kind) {
        buf_puts(&l->out, "\\u0000");
        buf_puts(&l->out, l->nonce);
        buf_append(&l->out, &kind, 1);
        l->marks++;
    }
    buf_append(&l->out, text, n);
    if (kind == 'R')
        buf_append(&l->out, "\"", 1);
    l->emitted = l->pos + skip;
}

static int
s_hex4(const char *s, size_t avail, unsigned *cp)
{
    if (avail < 4)
        return -1;
    *cp = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d > 15)
            return -1;
        *cp = *cp << 4 | d;
    }
    return 0;
}

/* Is the string starting at in[start] (just after its quote) an object
 * key, i.e. followed by ':'? */
static int
s_is_key(const s_lenient_t *l, size_t start)
{
    size_t i = start;
    while (i < l->len && l->in[i] != '"')
        i += l->in[i] == '\\' ? 2 : 1;
    for (i++; i < l->len; i++)
        if (l->in[i] != ' ' && l->in[i] != '\t' && l->in[i] != '\n' &&
            l->in[i] != '\r')
            return l->in[i] == ':';
    return 0;
}

/* Walk a string (l->pos at its opening quote), rewriting lone surrogates. */
static void
s_copy_string(s_lenient_t *l)
{
    size_t start = ++l->pos;
    int key = -1; /* unknown until a lone surrogate needs it */
    while (l->pos < l->len) {
        /* Only a quote or a backslash matters here. */
        const char *p = l->in + l->pos;
        size_t rest = l->len - l->pos, k = 0;
        while (k < rest && p[k] != '"' && p[k] != '\\')
            k++;
        l->pos += k;
        if (k == rest || p[k] == '"')
            break;
        p += k;
        unsigned cp, lo;
        if (l->pos + 1 >= l->len) {
            l->pos++;
            continue;
        }
        if (p[1] != 'u' || s_hex4(p + 2, l->len - l->pos - 2, &cp) ||
            cp < 0xD800 || cp > 0xDFFF) {
            l->pos += 2;
            continue;
        }
        if (cp < 0xDC00 && l->pos + 12 <= l->len && p[6] == '\\' &&
            p[7] == 'u' && !s_hex4(p + 8, 4, &lo) && lo >= 0xDC00 &&
            lo <= 0xDFFF) {
            l->pos += 12; /* a proper pair */
            continue;
        }
        if (key < 0)
            key = s_is_key(l, start);
        if (key)
            s_replace(l, 0, "\\ufffd", 6, 6);
        else
            s_replace(l, 'S', p + 2, 4, 6);
        if (!l->copy)
            return;
        l->pos += 6;
    }
    if (l->pos < l->len)
        l->pos++;
}

/* A number or NaN/Infinity literal at l->pos. */
static void
s_copy_literal(s_lenient_t *l)
{
    const char *p = l->in + l->pos;
    size_t rest = l->len - l->pos, n = 0;
    static const char *const words[] = {"NaN", "Infinity", "-Infinity"};
    for (size_t i = 0; i < 3; i++) {
        size_t w = strlen(words[i]);
        if (rest >= w && !memcmp(p, words[i], w)) {
            s_replace(l, 'R', words[i], w, w);
            l->pos += w;
            return;
        }
    }
    int real = 0;
    while (n < rest && (strchr("0123456789+-", p[n]) ||
                        (strchr(".eE", p[n]) && (real = 1))))
        n++;
    if (n == 0) { /* not ours: let jansson report it */
        l->pos++;
        return;
    }
    /* Fewer than 19 characters: an integer fits in 64 bits, and a real
     * without an exponent that long cannot overflow a double. */
    if (n >= 19 || (real && memchr(p, 'e', n)) || (real && memchr(p, 'E', n))) {
        char *text = xstrndup(p, n);
        errno = 0;
        if (real) {
            double d = strtod(text, NULL);
            if (errno == ERANGE && isinf(d))
                s_replace(l, 'R', d < 0 ? "-Infinity" : "Infinity",
                          d < 0 ? 9 : 8, n);
        } else {
            (void)strtoll(text, NULL, 10);
            /* Python writes int(text): no "-0", no leading '+' (JSON has
             * none anyway). */
            if (errno == ERANGE)
                s_replace(l, 'R', p, n, n);
        }
        free(text);
    }
    l->pos += n;
}

/* Undo the markers in string `s`: a new value, or NULL if it has none. */
static json_t *
s_unmark(const s_lenient_t *l, const json_t *s)
{
    const char *v = json_string_value(s);
    size_t len = json_string_length(s);
    size_t mlen = 1 + NONCE_LEN + 1;
    const char *hit = memchr(v, '\0', len);
    if (!hit)
        return NULL;
    buf_t b;
    buf_init(&b, 0);
    if (hit == v && len > mlen && v[mlen - 1] == 'R' &&
        !memcmp(v + 1, l->nonce, NONCE_LEN)) {
        buf_append(&b, "\xff", 1);
        buf_append(&b, v + mlen, len - mlen);
    } else {
        size_t i = 0;
        while (i < len) {
            if (v[i] == '\0' && len - i >= mlen + 4 &&
                !memcmp(v + i + 1, l->nonce, NONCE_LEN) &&
                v[i + mlen - 1] == 'S') {
                unsigned cp = 0;
                s_hex4(v + i + mlen, 4, &cp);
                char wtf[3] = {(char)(0xE0 | cp >> 12),
                               (char)(0x80 | ((cp >> 6) & 0x3F)),
                               (char)(0x80 | (cp & 0x3F))};
                buf_append(&b, wtf, 3);
                i += mlen + 4;
            } else {
                buf_append(&b, v + i, 1);
                i++;
            }
        }
    }
    size_t n;
    char *text = buf_detach(&b, &n);
    json_t *out = json_stringn_nocheck(text, n);
    free(text);
    return out;
}

static void
s_unmark_tree(const s_lenient_t *l, json_t *v)
{
    const char *key;
    json_t *child, *fixed;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, key, child)
        {
            if (json_is_string(child) && (fixed = s_unmark(l, child)))
                json_object_set_new_nocheck(v, key, fixed);
            else
                s_unmark_tree(l, child);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, child)
        {
            if (json_is_string(child) && (fixed = s_unmark(l, child)))
                json_array_set_new(v, i, fixed);
            else
                s_unmark_tree(l, child);
        }
    }
}

static void
s_make_nonce(s_lenient_t *l)
{
    static const char hex[] = "0123456789abcdef";
    static unsigned long counter;
    for (;;) {
        uint64_t x = (uint64_t)(uintptr_t)l ^ ((uint64_t)++counter << 40) ^
                     (uint64_t)rand();
        for (int i = 0; i < NONCE_LEN; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            l->nonce[i] = hex[(x >> 60) & 15];
        }
        l->nonce[NONCE_LEN] = '\0';
        if (!memmem(l->in, l->len, l->nonce, NONCE_LEN))
            return;
    }
}

/* ---- plain JSON through yajl ------------------------------------------ */

/* jansson reads a character at a time through a callback (about 100 MB/s
 * here), so nb_json_loadb first has yajl's SAX parser read the buffer and
 * builds the same jansson values from its callbacks. That path declines
 * (returns NULL) anything but plain, valid JSON holding nothing
 * Python-only: NaN, Infinity, integers past 64 bits, a real past the
 * double range, a lone surrogate escape, "\u0000", a nesting deeper than
 * S_SAX_DEPTH, or any error. Declined text goes the way it went before
 * (the lenient rewrite, then jansson), so what a document reads as, and
 * every error message, stay jansson's. On what it accepts it gives what
 * json_loadb(data, len, JSON_ALLOW_NUL) gives.
 *
 * Where yajl is laxer than jansson, s_sax_plain declines first: yajl
 * checks only the shape of a UTF-8 sequence (it takes overlong forms,
 * encoded surrogates and code points past U+10FFFF), takes \v and \f as
 * whitespace, turns a lone surrogate escape into '?' or its own bytes,
 * joins a high surrogate escape with whatever \u escape follows, and
 * reads \u0000 as a NUL. */
enum { S_SAX_DEPTH = 512 };

typedef struct s_sax {
    json_t *open[S_SAX_DEPTH]; /* containers open, innermost last */
    int depth;                 /* entries in `open` */
    json_t *root;              /* the document, once it has begun */
    const char *in;            /* the input: keys in it need no copy */
    size_t len;                /* bytes at `in` */
    const char *key;           /* the member name awaiting its value */
    size_t keylen;             /* bytes at `key` (never a NUL among them) */
    char *keybuf;              /* a copy of a key yajl decoded */
    size_t keycap;             /* bytes allocated at `keybuf` */
    yajl_handle h;             /* the parser calling us */
    size_t end;                /* bytes up to the root's end, or 0 */
} s_sax_t;

/* The bytes an escape at p (a backslash) takes, or 0 when it is one yajl
 * reads otherwise than jansson: \u0000, or a surrogate that is not a high
 * one followed by a low one. An escape yajl refuses counts as 2 bytes:
 * yajl fails on it anyway. */
static size_t
s_escape_len(const unsigned char *p, const unsigned char *end)
{
    unsigned cp, lo;
    if (end - p < 6 || p[1] != 'u' ||
        s_hex4((const char *)p + 2, (size_t)(end - p - 2), &cp))
        return 2;
    if (cp == 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
        return 0;
    if (cp < 0xD800 || cp > 0xDFFF)
        return 6;
    if (end - p >= 12 && p[6] == '\\' && p[7] == 'u' &&
        !s_hex4((const char *)p + 8, 4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
        return 12;
    return 0;
}

/* Whether yajl may read the input: valid UTF-8 by jansson's rules, no
 * control byte but tab, newline and carriage return (inside a string
 * both refuse one; outside, yajl also skips \v and \f), no escape that
 * s_escape_len refuses. Eight bytes at a time where none needs a look. */
static int
s_sax_plain(const char *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data, *end = p + len;
    const uint64_t ones = 0x0101010101010101ULL, high = ones * 0x80;
    while (p < end) {
        if (end - p >= 8) {
            uint64_t w, bs, look;
            memcpy(&w, p, 8);
            bs = w ^ (ones * '\\');
            /* Flags a byte >= 0x80, < 0x20, or a backslash; the lowest
             * flag is always a real one (a false one sits above it). */
            look = (w | ((w - ones * 0x20) & ~w) | ((bs - ones) & ~bs)) & high;
            if (!look) {
                p += 8;
                continue;
            }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            p += __builtin_ctzll(look) / 8; /* the plain bytes before it */
#endif
        }
        size_t n = 1;
        if (*p >= 0x80)
            n = utf8_seq_len(p, (size_t)(end - p)); /* jansson's rules */
        else if (*p == '\\')
            n = s_escape_len(p, end);
        else if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
            n = 0;
        if (n == 0)
            return 0;
        p += n < (size_t)(end - p) ? n : (size_t)(end - p);
    }
    return 1;
}

/* Put v where the document stands: the root, the next element of the
 * innermost array, or the value of the member named last. 1, or 0 to
 * stop yajl (the document declines). */
static int
s_sax_add(s_sax_t *s, json_t *v)
{
    if (!v)
        return 0;
    if (s->depth == 0) {
        if (s->root || !(json_is_object(v) || json_is_array(v))) {
            json_decref(v); /* jansson reads an object or array only */
            return 0;
        }
        s->root = v;
        return 1;
    }
    json_t *top = s->open[s->depth - 1];
    if (json_is_array(top))
        return json_array_append_new(top, v) == 0;
    /* Last wins for a repeated name, as in jansson. */
    return json_object_setn_new_nocheck(top, s->key, s->keylen, v) == 0;
}

static int
s_sax_open(s_sax_t *s, json_t *v)
{
    if (s->depth >= S_SAX_DEPTH) {
        json_decref(v);
        return 0;
    }
    /* Added at once, so only the innermost object ever waits for a key. */
    if (!s_sax_add(s, json_incref(v))) {
        json_decref(v);
        return 0;
    }
    s->open[s->depth++] = v;
    json_decref(v); /* its parent (or s->root) holds it */
    return 1;
}

static int
s_sax_null(void *ctx)
{
    return s_sax_add(ctx, json_null());
}

static int
s_sax_boolean(void *ctx, int b)
{
    return s_sax_add(ctx, json_boolean(b));
}

/* The number's text, with jansson's conversions (strtoll, strtod). */
static int
s_sax_number(void *ctx, const char *num, size_t n)
{
    char text[64], *stop;
    int real =
        memchr(num, '.', n) || memchr(num, 'e', n) || memchr(num, 'E', n);
    if (n >= sizeof text || (!real && n >= 19))
        return 0; /* may be past 64 bits: the lenient path decides */
    memcpy(text, num, n);
    text[n] = '\0';
    errno = 0;
    if (!real) {
        long long i = strtoll(text, &stop, 10);
        return !*stop && !errno && s_sax_add(ctx, json_integer((json_int_t)i));
    }
    double d = strtod(text, &stop);
    if (*stop || (errno == ERANGE && isinf(d)))
        return 0; /* another locale's decimal point, or an overflow */
    return s_sax_add(ctx, json_real(d));
}

static int
s_sax_string(void *ctx, const unsigned char *str, size_t n)
{
    return s_sax_add(ctx, json_stringn_nocheck((const char *)str, n));
}

static int
s_sax_key(void *ctx, const unsigned char *str, size_t n)
{
    s_sax_t *s = ctx;
    const char *k = (const char *)str;
    if (k >= s->in && k < s->in + s->len) {
        s->key = k; /* no escapes: it stays where it is */
    } else {
        /* yajl decoded it into a buffer it reuses for the value. */
        if (n > s->keycap) {
            char *grown = realloc(s->keybuf, n);
            if (!grown)
                return 0;
            s->keybuf = grown;
            s->keycap = n;
        }
        if (n)
            memcpy(s->keybuf, k, n);
        s->key = n ? s->keybuf : ""; /* never NULL for jansson */
    }
    s->keylen = n;
    return 1;
}

static int
s_sax_start_map(void *ctx)
{
    return s_sax_open(ctx, json_object());
}

static int
s_sax_start_array(void *ctx)
{
    return s_sax_open(ctx, json_array());
}

/* A container ends. When it is the root, yajl stops there: what follows
 * is checked by s_sax_load, not by yajl, which takes an unterminated
 * string after the document for input still to come. */
static int
s_sax_end(void *ctx)
{
    s_sax_t *s = ctx;
    if (--s->depth > 0)
        return 1;
    s->end = yajl_get_bytes_consumed(s->h); /* just past the bracket */
    return 0;
}

static json_t *
s_sax_load(const char *data, size_t len)
{
    static const yajl_callbacks callbacks = {
        .yajl_null = s_sax_null,
        .yajl_boolean = s_sax_boolean,
        .yajl_number = s_sax_number, /* the text: we convert it */
        .yajl_string = s_sax_string,
        .yajl_start_map = s_sax_start_map,
        .yajl_map_key = s_sax_key,
        .yajl_end_map = s_sax_end,
        .yajl_start_array = s_sax_start_array,
        .yajl_end_array = s_sax_end,
    };
    s_sax_t s = {.in = data, .len = len};

    if (!s_sax_plain(data, len))
        return NULL;
    yajl_handle h = s.h = yajl_alloc(&callbacks, NULL, &s);
    if (!h)
        return NULL;
    /* yajl's defaults, spelled out: strict JSON, one whole document. */
    yajl_config(h, yajl_allow_comments, 0);
    yajl_config(h, yajl_dont_validate_strings, 0);
    yajl_config(h, yajl_allow_trailing_garbage, 0);
    yajl_config(h, yajl_allow_multiple_values, 0);
    yajl_config(h, yajl_allow_partial_values, 0);
    /* s_sax_end stops yajl at the root's end: only whitespace may follow
     * (jansson's rule; s_sax_plain has refused \v and \f already). */
    int ok = yajl_parse(h, (const unsigned char *)data, len) ==
                 yajl_status_client_canceled &&
             s.end > 0 && s.end <= len;
    for (size_t i = s.end; ok && i < len; i++)
        ok = data[i] == ' ' || data[i] == '\n' || data[i] == '\r' ||
             data[i] == '\t';
    yajl_free(h);
    free(s.keybuf);
    if (!ok) {
        json_decref(s.root);
        return NULL;
    }
    return s.root;
}

/* One walk over the input (see s_lenient_t). */
static void
s_walk(s_lenient_t *l)
{
    l->pos = 0;
    while (l->pos < l->len && (l->copy || !l->rewrite)) {
        char c = l->in[l->pos];
        if (c == '"')
            s_copy_string(l);
        else if (c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I')
            s_copy_literal(l);
        else
            l->pos++;
    }
}

json_t *
nb_json_loadb(const char *data, size_t len, json_error_t *err)
{
    json_t *root = s_sax_load(data, len);

    if (root)
        return root;
    return nb_json_loadb_reference(data, len, err);
}

json_t *
nb_json_loadb_reference(const char *data, size_t len, json_error_t *err)
{
    s_lenient_t l = {.in = data, .len = len};
    json_t *root;

    s_walk(&l);
    if (!l.rewrite)
        return json_loadb(data, len, JSON_ALLOW_NUL, err);
    s_make_nonce(&l);
    buf_init(&l.out, 0);
    l.copy = 1;
    s_walk(&l);
    s_flush(&l, len);
    root = json_loadb(l.out.data ? l.out.data : "", l.out.len, JSON_ALLOW_NUL,
                      err);
    if (root && l.marks)
        s_unmark_tree(&l, root);
    buf_release(&l.out);
    return root;
}

const char *
nb_json_raw(const json_t *v)
{
    const char *s = json_string_value(v);
    return s && s[0] == NB_JSON_RAW_MARK ? s + 1 : NULL;
}
