/* ag_image_fit: a PNG over the side or byte limit is scaled down to fit,
 * keeping its aspect and its colours; one within both is left alone; what
 * is not a PNG, or too many pixels, is refused with a reason. */
#include "agent/loop/ag_image.h"
#include "tests/tap.h"

#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A w x h RGBA PNG: left half red, right half blue (random green
 * when `noisy`). */
static unsigned char *
s_png(unsigned w, unsigned h, bool noisy, size_t *len)
{
    unsigned char *px = malloc((size_t)w * h * 4);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        bool left = i % w < w / 2;
        px[i * 4 + 0] = left ? 255 : 0;
        px[i * 4 + 1] = noisy ? (unsigned char)rand() : 0;
        px[i * 4 + 2] = left ? 0 : 255;
        px[i * 4 + 3] = 255;
    }
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = w;
    img.height = h;
    img.format = PNG_FORMAT_RGBA;
    png_alloc_size_t size = 0;
    png_image_write_to_memory(&img, NULL, &size, 0, px, 0, NULL);
    unsigned char *out = malloc(size);
    png_image_write_to_memory(&img, out, &size, 0, px, 0, NULL);
    free(px);
    *len = size;
    return out;
}

/* The pixel at (x, y) of a PNG, as RGBA. */
static void
s_pixel(const unsigned char *png, size_t len, unsigned x, unsigned y,
        unsigned char rgba[4])
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    png_image_begin_read_from_memory(&img, png, len);
    img.format = PNG_FORMAT_RGBA;
    unsigned char *px = malloc(PNG_IMAGE_SIZE(img));
    png_image_finish_read(&img, NULL, px, 0, NULL);
    memcpy(rgba, px + ((size_t)y * img.width + x) * 4, 4);
    free(px);
}

int
main(void)
{
    size_t len;
    unsigned char *png = s_png(2000, 500, false, &len), *out;
    size_t olen;
    unsigned w, h;
    err_t err = {0};
    is_int(ag_image_fit(png, len, 800, 0, &out, &olen, &w, &h, &err), 0,
           "a 2000x500 PNG is fitted to 800 px");
    ok(out && w == 800 && h == 200, "to 800x200, aspect kept (%ux%u)", w, h);
    unsigned char c[4];
    s_pixel(out, olen, 10, 10, c);
    ok(c[0] == 255 && c[2] == 0, "its left half is still red");
    s_pixel(out, olen, 700, 150, c);
    ok(c[0] == 0 && c[2] == 255, "its right half is still blue");
    free(out);

    is_int(ag_image_fit(png, len, 2000, len + 1, &out, &olen, &w, &h, &err), 0,
           "a PNG within both limits ...");
    ok(out == NULL && w == 2000 && h == 500, "... is left alone");
    free(png);

    /* Noise compresses badly: the byte limit makes it smaller. */
    png = s_png(400, 400, true, &len);
    size_t limit = len / 4;
    is_int(ag_image_fit(png, len, 0, limit, &out, &olen, &w, &h, &err), 0,
           "a %zu-byte noisy PNG is fitted to %zu bytes", len, limit);
    ok(out && olen <= limit && w < 400 && w == h, "%zu bytes, %ux%u", olen, w,
       h);
    free(out);
    free(png);

    static const unsigned char junk[] = "GIF89a not a png";
    ok(ag_image_fit(junk, sizeof junk, 10, 10, &out, &olen, &w, &h, &err) ==
               -1 &&
           err.code == ERR_USAGE && strstr(err.text, "not a PNG"),
       "not a PNG: refused with a reason (%s)", err.text);
    return done_testing();
}
