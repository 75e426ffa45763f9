#include "agent/loop/ag_render.h"

#include "common/buf.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <sodium.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

unsigned char *
ag_base64_decode(const char *b64, size_t *len)
{
    size_t max = strlen(b64) / 4 * 3 + 3;
    unsigned char *bin = xmalloc(max);
    if (sodium_base642bin(bin, max, b64, strlen(b64), "\n\r ", len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0) {
        free(bin);
        return NULL;
    }
    return bin;
}

char *
ag_base64_encode(const unsigned char *bin, size_t len)
{
    size_t cap = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
    char *out = xmalloc(cap);
    sodium_bin2base64(out, cap, bin, len, sodium_base64_VARIANT_ORIGINAL);
    return out;
}

int
ag_png_size(const unsigned char *png, size_t len, unsigned *w, unsigned *h)
{
    static const unsigned char sig[8] = {0x89, 'P',  'N',  'G',
                                         '\r', '\n', 0x1a, '\n'};
    if (len < 24 || memcmp(png, sig, 8) != 0 || memcmp(png + 12, "IHDR", 4))
        return -1;
    *w = (unsigned)png[16] << 24 | (unsigned)png[17] << 16 |
         (unsigned)png[18] << 8 | png[19];
    *h = (unsigned)png[20] << 24 | (unsigned)png[21] << 16 |
         (unsigned)png[22] << 8 | png[23];
    return 0;
}

/* Skip a control string's body (OSC, DCS, SOS, PM, APC) up to its
 * terminator: BEL, ESC \ or the 8-bit ST (U+009C). */
static const unsigned char *
s_skip_string(const unsigned char *r)
{
    while (*r) {
        if (*r == 0x07)
            return r + 1;
        if (r[0] == 0x1b && r[1] == '\\')
            return r + 2;
        if (r[0] == 0xc2 && r[1] == 0x9c)
            return r + 2;
        r++;
    }
    return r;
}

/* Skip a CSI's parameters and intermediates, then its final byte. */
static const unsigned char *
s_skip_csi(const unsigned char *r)
{
    while (*r >= 0x20 && *r <= 0x3f)
        r++;
    if (*r >= 0x40 && *r <= 0x7e)
        r++;
    return r;
}

char *
ag_strip_ansi(char *s)
{
    unsigned char *w = (unsigned char *)s;
    const unsigned char *r = (const unsigned char *)s;
    while (*r) {
        unsigned char c = r[0], n = r[1];
        if (c == 0x1b) {
            if (n == '[')
                r = s_skip_csi(r + 2);
            else if (n == ']' || n == 'P' || n == 'X' || n == '^' || n == '_')
                r = s_skip_string(r + 2);
            else if (n >= 0x20 && n <= 0x2f) { /* ESC ( B and the like */
                r += 2;
                while (*r >= 0x20 && *r <= 0x2f)
                    r++;
                if (*r >= 0x30 && *r <= 0x7e)
                    r++;
            } else if (n >= 0x30 && n <= 0x7e) /* ESC c, ESC 7, ... */
                r += 2;
            else
                r++; /* a lone ESC */
            continue;
        }
        if (c == 0xc2 && n >= 0x80 && n <= 0x9f) { /* C1 as UTF-8 */
            if (n == 0x9b)
                r = s_skip_csi(r + 2);
            else if (n == 0x9d || n == 0x90 || n == 0x98 || n == 0x9e ||
                     n == 0x9f)
                r = s_skip_string(r + 2);
            else
                r += 2;
            continue;
        }
        if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) {
            r++; /* BEL, backspace, other C0 controls, DEL */
            continue;
        }
        *w++ = *r++;
    }
    *w = '\0';
    return s;
}

bool
ag_image_type_ok(const char *mime, const unsigned char *d, size_t len)
{
    if (strcmp(mime, "image/png") == 0)
        return len >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0;
    if (strcmp(mime, "image/jpeg") == 0)
        return len >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff;
    if (strcmp(mime, "image/gif") == 0)
        return len >= 6 &&
               (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0);
    if (strcmp(mime, "image/svg+xml") == 0) {
        /* Skip a BOM, blanks, an XML declaration, comments and a doctype:
         * the first element must be <svg. */
        size_t i = len >= 3 && memcmp(d, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
        for (;;) {
            while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' ||
                               d[i] == '\n'))
                i++;
            if (i + 1 < len && d[i] == '<' &&
                (d[i + 1] == '?' || d[i + 1] == '!')) {
                const void *gt = memchr(d + i, '>', len - i);
                if (!gt)
                    return false;
                i = (size_t)((const unsigned char *)gt - d) + 1;
                continue;
            }
            return i + 4 <= len && memcmp(d + i, "<svg", 4) == 0;
        }
    }
    return false;
}

void
ag_render_end_lines(ag_render_t *r)
{
    if (r->out_open) {
        fputc('\n', r->out);
        fflush(r->out);
        r->out_open = false;
    }
    if (r->err_open) {
        fputc('\n', r->err);
        fflush(r->err);
        r->err_open = false;
    }
}

/* Does an SVG document carry something that runs when a browser opens
 * the saved file: a <script> element, a javascript: URL or an on...=
 * event attribute? A sensible check, not a sanitizer: such a file is
 * not saved. */
static const char *
s_svg_active(const unsigned char *d, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (d[i] == '<' && len - i >= 7 &&
            strncasecmp((const char *)d + i + 1, "script", 6) == 0)
            return "a <script> element";
        if ((d[i] == 'j' || d[i] == 'J') && len - i >= 11 &&
            strncasecmp((const char *)d + i, "javascript:", 11) == 0)
            return "a javascript: URL";
        if ((d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r' ||
             d[i] == '/') &&
            len - i >= 4 && (d[i + 1] == 'o' || d[i + 1] == 'O') &&
            (d[i + 2] == 'n' || d[i + 2] == 'N')) {
            size_t j = i + 3;
            while (j < len && isalpha(d[j]))
                j++;
            while (j < len && (d[j] == ' ' || d[j] == '\t'))
                j++;
            if (j > i + 3 && j < len && d[j] == '=')
                return "an on... event attribute";
        }
    }
    return NULL;
}

/* Save (or name) image `bin` of `len` bytes; takes `bin`. */
static void
s_save_image(ag_render_t *r, const char *mime, unsigned char *bin, size_t len)
{
    if (!ag_image_type_ok(mime, bin, len)) {
        fprintf(r->out, "[%s, %zu bytes: not a %s image; not saved]\n", mime,
                len, mime + 6);
        free(bin);
        return;
    }
    bool svg = strcmp(mime, "image/svg+xml") == 0;
    const char *active = svg ? s_svg_active(bin, len) : NULL;
    if (active) {
        fprintf(r->out, "[%s, %zu bytes: holds %s; not saved]\n", mime, len,
                active);
        free(bin);
        return;
    }
    unsigned w = 0, h = 0;
    char dims[48] = "";
    if (ag_png_size(bin, len, &w, &h) == 0)
        snprintf(dims, sizeof dims, " %ux%u", w, h);
    if (!r->img_dir) {
        fprintf(r->out, "[%s%s, %zu bytes; pass --out DIR to save it]\n", mime,
                dims, len);
        free(bin);
        return;
    }
    const char *ext = strcmp(mime, "image/jpeg") == 0  ? "jpg"
                      : strcmp(mime, "image/gif") == 0 ? "gif"
                      : svg                            ? "svg"
                                                       : "png";
    char name[64];
    snprintf(name, sizeof name, "out-%d.%s", ++r->img_count, ext);
    err_t err;
    if (sb_outdir_write(r->img_dir, name, bin, len, &err) == 0)
        fprintf(r->out, "[%s%s saved to %s/%s]\n", mime, dims,
                sb_outdir_path(r->img_dir), name);
    else
        fprintf(r->out, "[%s%s: not saved: %s]\n", mime, dims, err.text);
    free(bin);
}

static void
s_put_text(FILE *f, const char *text)
{
    fputs(text, f);
    size_t n = strlen(text);
    if (n && text[n - 1] != '\n')
        fputc('\n', f);
}

static void
s_render_data(ag_render_t *r, json_t *data)
{
    ag_render_end_lines(r);
    static const char *const images[] = {"image/png", "image/jpeg",
                                         "image/gif"};
    for (size_t i = 0; i < sizeof images / sizeof images[0]; i++) {
        const char *b64 = json_string_value(json_object_get(data, images[i]));
        if (b64) {
            size_t len = 0;
            unsigned char *bin = ag_base64_decode(b64, &len);
            if (bin)
                s_save_image(r, images[i], bin, len);
            else
                fprintf(r->out, "[%s: invalid base64 data]\n", images[i]);
            return;
        }
    }
    /* SVG travels as text (nbformat may split it into lines). */
    json_t *svg = json_object_get(data, "image/svg+xml");
    if (json_is_string(svg) || json_is_array(svg)) {
        buf_t b;
        buf_init(&b, 0);
        size_t i;
        json_t *line;
        if (json_is_string(svg))
            buf_append(&b, json_string_value(svg), json_string_length(svg));
        json_array_foreach(svg, i, line) if (json_is_string(line))
            buf_append(&b, json_string_value(line), json_string_length(line));
        size_t len = 0;
        unsigned char *bin = (unsigned char *)buf_detach(&b, &len);
        s_save_image(r, "image/svg+xml", bin, len);
        return;
    }
    const char *text = json_string_value(json_object_get(data, "text/plain"));
    if (text)
        s_put_text(r->out, text);
    else if (json_object_size(data))
        fprintf(r->out, "[%s output]\n",
                json_object_iter_key(json_object_iter(data)));
}

void
ag_render_output(ag_render_t *r, json_t *output)
{
    const char *type =
        json_string_value(json_object_get(output, "output_type"));
    if (!type)
        return;
    if (strcmp(type, "stream") == 0) {
        const char *name = json_string_value(json_object_get(output, "name"));
        const char *text = json_string_value(json_object_get(output, "text"));
        if (text && *text) {
            bool to_err = name && strcmp(name, "stderr") == 0;
            FILE *f = to_err ? r->err : r->out;
            fputs(text, f);
            fflush(f);
            *(to_err ? &r->err_open : &r->out_open) =
                text[strlen(text) - 1] != '\n';
        }
    } else if (strcmp(type, "error") == 0) {
        ag_render_end_lines(r);
        json_t *tb = json_object_get(output, "traceback");
        size_t i;
        json_t *line;
        json_array_foreach(tb, i, line)
        {
            char *s =
                xstrdup(json_string_value(line) ? json_string_value(line) : "");
            s_put_text(r->err, r->color ? s : ag_strip_ansi(s));
            free(s);
        }
        if (!json_array_size(tb))
            fprintf(r->err, "%s: %s\n",
                    json_string_value(json_object_get(output, "ename")),
                    json_string_value(json_object_get(output, "evalue")));
        fflush(r->err);
    } else {
        s_render_data(r, json_object_get(output, "data"));
        fflush(r->out);
    }
}
