/*
 * jget: reading one member of a JSON object (jansson), the one family the
 * layers use. `o` may be NULL or not an object; the result is borrowed
 * from `o`.
 *
 *   jget_str(o, key, dflt)     the string; dflt when the member is absent
 *                              or not a string
 *   jget_strict(o, key, dflt)  dflt when absent; the string when it is a
 *                              string without a NUL byte inside; NULL for
 *                              anything else (another type, or a string C
 *                              would cut short): for input where a wrong
 *                              member is an error, not a default
 *   jget_int(o, key, dflt)     the integer; dflt when absent or not one
 *   jget_bool(o, key, dflt)    true or false; dflt when absent or not one
 */
#ifndef COMMON_JGET_H
#define COMMON_JGET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

const char *jget_str(const json_t *o, const char *key, const char *dflt);
const char *jget_strict(const json_t *o, const char *key, const char *dflt);
int64_t jget_int(const json_t *o, const char *key, int64_t dflt);
bool jget_bool(const json_t *o, const char *key, bool dflt);

#endif
