#include "jget.h"

#include <string.h>

const char *
jget_str(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

const char *
jget_strict(const json_t *o, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return dflt;
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    return strlen(s) == json_string_length(v) ? s : NULL;
}

int64_t
jget_int(const json_t *o, const char *key, int64_t dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

bool
jget_bool(const json_t *o, const char *key, bool dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}
