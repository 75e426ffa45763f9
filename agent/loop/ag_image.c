#include "agent/loop/ag_image.h"
#include "agent/loop/ag_render.h"

#include "common/xalloc.h"

#include <math.h>
#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Scale by the area average: each output pixel is the mean of the input
 * pixels it covers (RGBA, 8 bits). */
static unsigned char *
s_scale(const unsigned char *src, unsigned sw, unsigned sh, unsigned dw,
        unsigned dh)
{
    unsigned char *dst = xmalloc((size_t)dw * dh * 4);
    for (unsigned y = 0; y < dh; y++) {
        unsigned y0 = (unsigned)((unsigned long long)y * sh / dh);
        unsigned y1 = (unsigned)((unsigned long long)(y + 1) * sh / dh);
        if (y1 <= y0)
            y1 = y0 + 1;
        for (unsigned x = 0; x < dw; x++) {
            unsigned x0 = (unsigned)((unsigned long long)x * sw / dw);
            unsigned x1 = (unsigned)((unsigned long long)(x + 1) * sw / dw);
            if (x1 <= x0)
                x1 = x0 + 1;
            unsigned long long sum[4] = {0, 0, 0, 0};
            for (unsigned yy = y0; yy < y1; yy++) {
                const unsigned char *p = src + ((size_t)yy * sw + x0) * 4;
                for (unsigned xx = x0; xx < x1; xx++, p += 4)
                    for (int c = 0; c < 4; c++)
                        sum[c] += p[c];
            }
            unsigned long long n = (unsigned long long)(y1 - y0) * (x1 - x0);
            unsigned char *q = dst + ((size_t)y * dw + x) * 4;
            for (int c = 0; c < 4; c++)
                q[c] = (unsigned char)((sum[c] + n / 2) / n);
        }
    }
    return dst;
}

static int
s_encode(const unsigned char *rgba, unsigned w, unsigned h, unsigned char **out,
         size_t *out_len, err_t *err)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = w;
    img.height = h;
    img.format = PNG_FORMAT_RGBA;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&img, NULL, &size, 0, rgba, 0, NULL))
        return err_set(err, ERR_IO, "PNG encoding failed: %s", img.message);
    *out = xmalloc(size);
    if (!png_image_write_to_memory(&img, *out, &size, 0, rgba, 0, NULL)) {
        free(*out);
        *out = NULL;
        return err_set(err, ERR_IO, "PNG encoding failed: %s", img.message);
    }
    *out_len = size;
    return 0;
}

int
ag_image_fit(const unsigned char *png, size_t len, unsigned max_side,
             size_t max_bytes, unsigned char **out, size_t *out_len,
             unsigned *w, unsigned *h, err_t *err)
{
    *out = NULL;
    *out_len = 0;
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, png, len))
        return err_set(err, ERR_USAGE, "not a PNG that can be read: %s",
                       img.message);
    *w = img.width;
    *h = img.height;
    bool side_ok =
        !max_side || (img.width <= max_side && img.height <= max_side);
    if (side_ok && (!max_bytes || len <= max_bytes)) {
        png_image_free(&img);
        return 0;
    }
    if ((size_t)img.width * img.height > AG_IMAGE_MAX_PIXELS) {
        png_image_free(&img);
        return err_set(err, ERR_USAGE,
                       "%ux%u is more than %zu pixels to scale down", img.width,
                       img.height, AG_IMAGE_MAX_PIXELS);
    }
    img.format = PNG_FORMAT_RGBA;
    unsigned sw = img.width, sh = img.height;
    unsigned char *rgba = xmalloc(PNG_IMAGE_SIZE(img));
    if (!png_image_finish_read(&img, NULL, rgba, 0, NULL)) {
        free(rgba);
        return err_set(err, ERR_USAGE, "PNG decoding failed: %s", img.message);
    }
    double scale = 1.0;
    if (max_side && (sw > max_side || sh > max_side))
        scale = (double)max_side / (sw > sh ? sw : sh);
    int rc = -1;
    for (int tries = 0; tries < 8; tries++) {
        unsigned dw = (unsigned)(sw * scale), dh = (unsigned)(sh * scale);
        dw = dw ? dw : 1;
        dh = dh ? dh : 1;
        unsigned char *small = s_scale(rgba, sw, sh, dw, dh);
        unsigned char *enc = NULL;
        size_t enc_len = 0;
        rc = s_encode(small, dw, dh, &enc, &enc_len, err);
        free(small);
        if (rc)
            break;
        if (!max_bytes || enc_len <= max_bytes) {
            *out = enc;
            *out_len = enc_len;
            *w = dw;
            *h = dh;
            break;
        }
        free(enc);
        rc = -1;
        /* Bytes go roughly with the area: aim a little under. */
        scale *= sqrt((double)max_bytes / enc_len) * 0.9;
        if (dw <= 16 || dh <= 16)
            break;
    }
    free(rgba);
    if (rc && !err->code)
        err_set(err, ERR_USAGE, "could not fit %ux%u within %zu bytes", sw, sh,
                max_bytes);
    return rc;
}

/* One output's PNG fitted under max_b64, in place (o is our copy). */
static void
s_fit_output(json_t *o, size_t max_b64)
{
    json_t *data = json_object_get(o, "data");
    json_t *png = json_object_get(data, "image/png");
    if (!json_is_string(png) || json_string_length(png) <= max_b64)
        return;
    size_t len = 0;
    unsigned char *bin = ag_base64_decode(json_string_value(png), &len);
    unsigned char *out = NULL;
    size_t olen = 0;
    unsigned w = 0, h = 0, ow = 0, oh = 0;
    err_t err = {0};
    json_t *note;
    if (bin && ag_png_size(bin, len, &ow, &oh) == 0 &&
        ag_image_fit(bin, len, 0, max_b64 / 4 * 3, &out, &olen, &w, &h, &err) ==
            0 &&
        out) {
        char *b64 = ag_base64_encode(out, olen);
        json_object_set_new(data, "image/png", json_string(b64));
        free(b64);
        note = json_pack("{s:[ii]}", "scaled_from", (int)ow, (int)oh);
    } else {
        json_object_del(data, "image/png");
        note = json_pack("{s:s}", "image_left_out",
                         err.code ? err.text : "not a PNG that can be read");
    }
    free(bin);
    free(out);
    json_t *md = json_object_get(o, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(o, "metadata", md);
    }
    json_object_set_new(md, "jupyter_agent", note);
}

json_t *
ag_image_fit_outputs(const json_t *outputs, size_t max_b64)
{
    json_t *copy = json_array(), *o;
    size_t i;
    json_array_foreach(outputs, i, o)
    {
        json_t *png = json_object_get(json_object_get(o, "data"), "image/png");
        if (json_is_string(png) && json_string_length(png) > max_b64) {
            json_t *c = json_deep_copy(o);
            s_fit_output(c, max_b64);
            json_array_append_new(copy, c);
        } else {
            json_array_append(copy, o);
        }
    }
    return copy;
}
