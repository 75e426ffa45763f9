/*
 * ag_render: nbformat outputs as a terminal shows them, and images saved
 * to files. Used by `exec` and `ask`.
 */
#ifndef AGENT_LOOP_AG_RENDER_H
#define AGENT_LOOP_AG_RENDER_H

#include "common/err.h"
#include "sandbox/sb_files.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct ag_render {
    FILE *out;            /* where text goes (stdout) */
    FILE *err;            /* where stderr streams and tracebacks go */
    sb_outdir_t *img_dir; /* borrowed: save images here (exec --out, with
                             its caps); NULL = don't */
    int img_count;        /* images saved so far; names out-1.png, ... */
    bool color;           /* keep ANSI colour codes in tracebacks */
    bool out_open;        /* the last stream text to `out` did not end a line */
    bool err_open;        /* ... to `err` */
} ag_render_t;

/* Print one nbformat output dict (borrowed). Stream text is printed as
 * the kernel sent it (as jupyter console does); our own lines ("[image
 * saved ...]") always start on a line of their own. */
void ag_render_output(ag_render_t *r, json_t *output);
/* End any line stream text left open on `out` or `err`, so a status line
 * printed next starts on its own line. */
void ag_render_end_lines(ag_render_t *r);
/* Do `len` bytes start as an image of type `mime` must (PNG, JPEG and
 * GIF signatures; an SVG document's root element)? */
bool ag_image_type_ok(const char *mime, const unsigned char *data, size_t len);
/* Width and height from a PNG's IHDR; 0 on success. */
int ag_png_size(const unsigned char *png, size_t len, unsigned *w, unsigned *h);
/* Decode base64 (newlines allowed) into a new buffer; NULL if invalid. */
unsigned char *ag_base64_decode(const char *b64, size_t *len);
/* Base64 of `len` bytes, without line breaks. New string. */
char *ag_base64_encode(const unsigned char *bin, size_t len);
/* Remove terminal control sequences from `s` in place (text for the model
 * or a plain terminal): CSI, OSC, DCS, SOS, PM, APC (7- and 8-bit forms),
 * other ESC sequences, and C0 controls but '\n', '\t', '\r', and DEL.
 * Returns s. */
char *ag_strip_ansi(char *s);

#endif
