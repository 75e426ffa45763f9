/*
 * ag_image: an image fitted to what its reader takes. A PNG wider or
 * taller than `max_side` pixels, or bigger than `max_bytes`, is decoded
 * (libpng), scaled down by an area average and encoded again until it
 * fits; the original is left to the notebook. No I/O.
 */
#ifndef AGENT_LOOP_AG_IMAGE_H
#define AGENT_LOOP_AG_IMAGE_H

#include "common/err.h"

#include <jansson.h>
#include <stddef.h>

/* Pixels we decode at most (w * h): a bigger PNG is not attached. */
#define AG_IMAGE_MAX_PIXELS ((size_t)64 * 1000 * 1000)

/* Fit `png` (len bytes) within max_side (0 = any) and max_bytes (0 =
 * any). Returns 0 with *out NULL when it already fits, 0 with *out a new
 * malloc'd PNG (*out_len bytes, *w x *h) when it was scaled, or -1 with
 * err set (not a PNG we can read, too many pixels, cannot fit). */
int ag_image_fit(const unsigned char *png, size_t len, unsigned max_side,
                 size_t max_bytes, unsigned char **out, size_t *out_len,
                 unsigned *w, unsigned *h, err_t *err);

/* A copy of nbformat `outputs` whose PNGs over `max_b64` base64 bytes are
 * fitted under it (side unbounded), for a reader that caps a response
 * (MCP structuredContent); a PNG that cannot be fitted is replaced by
 * nothing (its mime type dropped, text/plain kept). Each changed output's
 * metadata gets "jupyter_agent": {"scaled_from": [w, h]} or {"image_left_out":
 * reason}. New reference. */
json_t *ag_image_fit_outputs(const json_t *outputs, size_t max_b64);

#endif
