#include "notebook-io/nb_compare.h"
#include "common/buf.h"
#include "common/jget.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <png.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text normalisation ------------------------------------------------- */

static bool
s_is_hex(char c)
{
    return isxdigit((unsigned char)c) && !isupper((unsigned char)c);
}

/* The parity tests' normalise_text: 0x + 6..16 lowercase hex -> 0xADDR, CSI
 * sequences dropped, "Cell In[N], line" / "Cell In N, line" -> N. */
static char *
s_norm_text(const char *s)
{
    buf_t b;
    buf_init(&b, 0);
    for (size_t i = 0; s[i];) {
        if (s[i] == '0' && s[i + 1] == 'x') {
            size_t n = 0;
            while (n < 16 && s_is_hex(s[i + 2 + n]))
                n++;
            if (n >= 6) {
                buf_puts(&b, "0xADDR");
                i += 2 + n;
                continue;
            }
        }
        if (s[i] == '\x1b' && s[i + 1] == '[') {
            size_t j = i + 2;
            while (isdigit((unsigned char)s[j]) || s[j] == ';')
                j++;
            if (isalpha((unsigned char)s[j])) {
                i = j + 1;
                continue;
            }
        }
        if (strncmp(s + i, "Cell In", 7) == 0) {
            size_t j = i + 7;
            if (s[j] == ' ' || s[j] == '[')
                j++;
            size_t d = j;
            while (isdigit((unsigned char)s[j]))
                j++;
            if (j > d) {
                size_t k = j + (s[j] == ']');
                if (strncmp(s + k, ", line", 6) == 0) {
                    buf_append(&b, s + i, d - i);
                    buf_puts(&b, "N");
                    i = j;
                    continue;
                }
            }
        }
        buf_append(&b, s + i, 1);
        i++;
    }
    return buf_detach(&b, NULL);
}

/* A short "- old / + new" for the first line where a and b differ. */
static char *
s_line_diff(const char *what, const char *a, const char *b)
{
    size_t line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    int na = (int)strcspn(la, "\n"), nb = (int)strcspn(lb, "\n");
    return xasprintf("%s, line %zu:\n  - %.*s\n  + %.*s", what, line,
                     na > 160 ? 160 : na, la, nb > 160 ? 160 : nb, lb);
}

/* ---- images ------------------------------------------------------------- */

static unsigned char *
s_unb64(const char *s, size_t *len)
{
    /* Notebooks may wrap base64 in newlines; libsodium skips what we
     * tell it to ignore. */
    size_t n = strlen(s);
    unsigned char *out = xmalloc(n + 1);
    if (sodium_base642bin(out, n, s, n, "\n\r ", len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static unsigned char *
s_png_rgba(const unsigned char *p, size_t n, png_uint_32 *w, png_uint_32 *h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, p, n))
        return NULL;
    img.format = PNG_FORMAT_RGBA;
    /* Refuse absurd sizes before allocating (a hostile notebook). */
    if (img.width == 0 || img.height == 0 ||
        (uint64_t)img.width * img.height > (uint64_t)1 << 28) {
        png_image_free(&img);
        return NULL;
    }
    unsigned char *px = xmalloc(PNG_IMAGE_SIZE(img));
    if (!png_image_finish_read(&img, NULL, px, 0, NULL)) {
        free(px);
        png_image_free(&img);
        return NULL;
    }
    *w = img.width;
    *h = img.height;
    return px;
}

char *
nb_compare_png_b64(const char *a, const char *b, double tolerance_pct)
{
    char *why = NULL;
    size_t na = 0, nb = 0;
    unsigned char *ra = s_unb64(a, &na), *rb = s_unb64(b, &nb);
    unsigned char *pa = NULL, *pb = NULL;
    png_uint_32 wa = 0, ha = 0, wb = 0, hb = 0;
    if (ra && rb && na == nb && memcmp(ra, rb, na) == 0)
        goto out; /* identical bytes */
    pa = ra ? s_png_rgba(ra, na, &wa, &ha) : NULL;
    pb = rb ? s_png_rgba(rb, nb, &wb, &hb) : NULL;
    if (!pa || !pb) {
        why = xasprintf("a PNG image could not be decoded (%s)",
                        !pa ? "recorded" : "re-run");
        goto out;
    }
    if (wa != wb || ha != hb) {
        why = xasprintf("image size %ux%u, re-run %ux%u", (unsigned)wa,
                        (unsigned)ha, (unsigned)wb, (unsigned)hb);
        goto out;
    }
    size_t npx = (size_t)wa * ha, differ = 0;
    for (size_t i = 0; i < npx; i++)
        for (int c = 0; c < 4; c++) {
            int d = (int)pa[i * 4 + c] - (int)pb[i * 4 + c];
            if (d > NB_COMPARE_CHANNEL_SLACK || d < -NB_COMPARE_CHANNEL_SLACK) {
                differ++;
                break;
            }
        }
    double pct = 100.0 * (double)differ / (double)npx;
    if (differ && pct > tolerance_pct)
        why = xasprintf("image %ux%u: %.3f%% of pixels differ (%zu of %zu; "
                        "--tolerance %.3g%%)",
                        (unsigned)wa, (unsigned)ha, pct, differ, npx,
                        tolerance_pct);
out:
    free(ra);
    free(rb);
    free(pa);
    free(pb);
    return why;
}

/* ---- outputs ------------------------------------------------------------ */

/* Consecutive same-name streams joined; other outputs as they are. New
 * array of new references. */
static json_t *
s_coalesce(const json_t *outputs)
{
    json_t *out = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(outputs, i, o)
    {
        json_t *last = json_array_get(out, json_array_size(out) - 1);
        if (last && strcmp(jget_str(o, "output_type", ""), "stream") == 0 &&
            strcmp(jget_str(last, "output_type", ""), "stream") == 0 &&
            strcmp(jget_str(o, "name", ""), jget_str(last, "name", "")) == 0) {
            char *t = xasprintf("%s%s", jget_str(last, "text", ""),
                                jget_str(o, "text", ""));
            json_object_set_new(last, "text", json_string(t));
            free(t);
        } else {
            json_array_append_new(out, json_deep_copy(o));
        }
    }
    return out;
}

/* Compare two texts after normalisation; a new diff string or NULL. */
static char *
s_cmp_text(const char *what, const char *a, const char *b)
{
    char *na = s_norm_text(a), *nb = s_norm_text(b);
    char *d = strcmp(na, nb) == 0 ? NULL : s_line_diff(what, na, nb);
    free(na);
    free(nb);
    return d;
}

/* The mime types of outputs derived from others in the same bundle. */
#define DERIVED_MIME_PREFIX "application/vnd.jupyter-agent."

static char *
s_cmp_data(size_t k, const json_t *da, const json_t *db, double tol)
{
    const char *mime;
    json_t *va;
    json_object_foreach((json_t *)da, mime, va)
    {
        /* jupyter-agent's chart and table data (docs/outputs.md) are read
         * off the picture and the frame next to them, which are compared;
         * a re-run through `run` does not add them. */
        if (strncmp(mime, DERIVED_MIME_PREFIX, strlen(DERIVED_MIME_PREFIX)) ==
            0)
            continue;
        json_t *vb = json_object_get(db, mime);
        if (!vb)
            return xasprintf("output %zu: %s is missing in the re-run", k,
                             mime);
        if (strcmp(mime, "image/png") == 0 && json_is_string(va) &&
            json_is_string(vb)) {
            char *d = nb_compare_png_b64(json_string_value(va),
                                         json_string_value(vb), tol);
            if (d) {
                char *r = xasprintf("output %zu: %s", k, d);
                free(d);
                return r;
            }
        } else if (json_is_string(va) && json_is_string(vb)) {
            char *what = xasprintf("output %zu %s", k, mime);
            char *d = strncmp(mime, "image/", 6) == 0 &&
                              strcmp(mime, "image/svg+xml") != 0
                          ? (json_equal(va, vb)
                                 ? NULL
                                 : xasprintf("%s: the image differs", what))
                          : s_cmp_text(what, json_string_value(va),
                                       json_string_value(vb));
            free(what);
            if (d)
                return d;
        } else if (!json_equal(va, vb)) {
            return xasprintf("output %zu: %s differs", k, mime);
        }
    }
    json_object_foreach((json_t *)db, mime, va)
    {
        if (!json_object_get(da, mime))
            return xasprintf("output %zu: the re-run adds %s", k, mime);
    }
    return NULL;
}

static char *
s_cmp_output(size_t k, const json_t *a, const json_t *b, double tol)
{
    const char *ta = jget_str(a, "output_type", ""),
               *tb = jget_str(b, "output_type", "");
    if (strcmp(ta, tb) != 0)
        return xasprintf("output %zu: %s, re-run %s", k, ta, tb);
    if (strcmp(ta, "stream") == 0) {
        if (strcmp(jget_str(a, "name", ""), jget_str(b, "name", "")) != 0)
            return xasprintf("output %zu: stream %s, re-run %s", k,
                             jget_str(a, "name", ""), jget_str(b, "name", ""));
        char *what = xasprintf("output %zu (%s)", k, jget_str(a, "name", ""));
        char *d =
            s_cmp_text(what, jget_str(a, "text", ""), jget_str(b, "text", ""));
        free(what);
        return d;
    }
    if (strcmp(ta, "error") == 0) {
        char *ea = xasprintf("%s: %s", jget_str(a, "ename", ""),
                             jget_str(a, "evalue", ""));
        char *eb = xasprintf("%s: %s", jget_str(b, "ename", ""),
                             jget_str(b, "evalue", ""));
        char *what = xasprintf("output %zu (error)", k);
        char *d = s_cmp_text(what, ea, eb);
        free(what);
        free(ea);
        free(eb);
        return d;
    }
    return s_cmp_data(k, json_object_get(a, "data"), json_object_get(b, "data"),
                      tol);
}

static char *
s_cmp_cell(const json_t *ca, const json_t *cb, double tol)
{
    json_t *oa = s_coalesce(json_object_get(ca, "outputs"));
    json_t *ob = s_coalesce(json_object_get(cb, "outputs"));
    char *d = NULL;
    size_t na = json_array_size(oa), nb = json_array_size(ob);
    for (size_t k = 0; k < na && k < nb && !d; k++)
        d = s_cmp_output(k + 1, json_array_get(oa, k), json_array_get(ob, k),
                         tol);
    if (!d && na != nb)
        d = xasprintf("%zu outputs, re-run %zu", na, nb);
    json_decref(oa);
    json_decref(ob);
    return d;
}

void
nb_compare_notebooks(const nb_notebook_t *want, const nb_notebook_t *got,
                     const nb_compare_opts_t *o, nb_compare_result_t *res)
{
    double tol = o ? o->image_tolerance_pct : 0;
    memset(res, 0, sizeof *res);
    res->diffs = json_array();
    size_t n = nb_notebook_ncells(want);
    for (size_t i = 0; i < n; i++) {
        json_t *ca = nb_notebook_cell(want, i);
        if (strcmp(jget_str(ca, "cell_type", ""), "code") != 0 ||
            json_is_null(json_object_get(ca, "execution_count")))
            continue; /* never ran in the recorded session */
        res->compared++;
        json_t *cb = nb_notebook_cell(got, i);
        char *d = NULL;
        if (!cb || strcmp(jget_str(cb, "cell_type", ""), "code") != 0)
            d = xstrdup("the re-run has no such code cell");
        else if (json_is_null(json_object_get(cb, "execution_count")))
            d = xstrdup("the re-run did not reach this cell");
        else
            d = s_cmp_cell(ca, cb, tol);
        if (!d) {
            res->reproduced++;
            continue;
        }
        const char *id = nb_cell_id(ca);
        json_array_append_new(res->diffs, json_pack("{s:I, s:s, s:s}", "cell",
                                                    (json_int_t)(i + 1), "id",
                                                    id ? id : "", "diff", d));
        free(d);
    }
}

void
nb_compare_result_release(nb_compare_result_t *res)
{
    json_decref(res->diffs);
    res->diffs = NULL;
}
