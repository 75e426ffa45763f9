/*
 * kb_output_impl: private to kernel-bridge/kb_output*.c: what an output
 * costs against the cap, computed in kb_output_size.c and charged by the
 * model in kb_output.c.
 */
#ifndef KERNEL_BRIDGE_KB_OUTPUT_IMPL_H
#define KERNEL_BRIDGE_KB_OUTPUT_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define COST_NODE 32       /* every JSON value: a jansson node */
#define COST_CONTAINER 160 /* every array or object more: its table */
#define COST_MEMBER 32     /* every object member, plus its key */
#define COST_OUTPUT 256    /* every output for itself */
#define COST_UPDATE 64     /* every update_display_data, per output */

/* Bytes s[0..len) takes in JSON written with ensure_ascii. */
size_t kb_output_esc_len(const char *s, size_t len);
/* Length of the longest prefix of s[0..len) whose escaped size is at most
 * `room` and that does not split a UTF-8 sequence. */
size_t kb_output_esc_prefix(const char *s, size_t len, size_t room);
/* The charge of one JSON value and everything in it. */
size_t kb_output_json_cost(json_t *v);
/* The charge of a whole output: the object and every field in it. */
size_t kb_output_cost(json_t *out);

/* a + b, saturating. */
static inline size_t
kb_output_add_sat(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

#endif
