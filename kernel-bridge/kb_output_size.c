/*
 * kb_output_size: what an output costs against kb_output's cap.
 *
 * The charge is the larger of an output's memory and its serialized JSON:
 * every JSON value COST_NODE (a jansson node and its allocation), every
 * array or object COST_CONTAINER more (its table), every object member
 * COST_MEMBER plus its key, every string its length as written with
 * ensure_ascii (kb_output_esc_len: a control byte is 6, a 4-byte UTF-8
 * character 12), and every output COST_OUTPUT for itself. So an empty
 * display_data costs about 750 bytes, close to the ~1 KiB of heap it
 * takes, instead of the 3 bytes it cost before; the cap bounds memory,
 * notebook size and work alike. No state, no I/O.
 */
#include "kernel-bridge/kb_output_impl.h"

#include <string.h>

/* Bytes one byte of a string takes in JSON written with ensure_ascii: a
 * UTF-8 lead byte carries its whole escape (\uXXXX, or two for a
 * character past U+FFFF), continuation bytes nothing. */
static unsigned
s_esc_byte(unsigned char c)
{
    if (c == '"' || c == '\\' || c == '\n' || c == '\t' || c == '\r' ||
        c == '\b' || c == '\f')
        return 2;
    if (c < 0x20 || c == 0x7f)
        return 6;
    if (c < 0x80)
        return 1;
    if (c < 0xc0)
        return 0;
    return c < 0xf0 ? 6 : 12;
}

size_t
kb_output_esc_len(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += s_esc_byte((unsigned char)s[i]);
    return n;
}

size_t
kb_output_esc_prefix(const char *s, size_t len, size_t room)
{
    size_t n = 0, used = 0;
    while (n < len) {
        size_t w = s_esc_byte((unsigned char)s[n]);
        if (used + w > room)
            break;
        used += w;
        n++;
    }
    while (n > 0 && n < len && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

size_t
kb_output_json_cost(json_t *v)
{
    size_t n = COST_NODE;
    const char *key;
    json_t *x;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return n +
               kb_output_esc_len(json_string_value(v), json_string_length(v));
    case JSON_OBJECT:
        n += COST_CONTAINER;
        json_object_foreach(v, key, x) n +=
            COST_MEMBER + kb_output_esc_len(key, strlen(key)) +
            kb_output_json_cost(x);
        return n;
    case JSON_ARRAY:
        n += COST_CONTAINER;
        json_array_foreach(v, i, x) n += kb_output_json_cost(x);
        return n;
    default:
        return n;
    }
}

size_t
kb_output_cost(json_t *out)
{
    return COST_OUTPUT + kb_output_json_cost(out);
}
