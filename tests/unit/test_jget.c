/* common/jget: the one family of JSON member getters, and its rules for an
 * absent member, another type, and a string with a NUL inside. */
#include "common/jget.h"
#include "tests/tap.h"

int
main(void)
{
    json_t *o = json_pack("{s:s, s:i, s:b, s:n, s:s%}", "s", "text", "i", 42,
                          "b", 1, "null", "nul", "a\0b", (size_t)3);
    is_str(jget_str(o, "s", "d"), "text", "jget_str: a string");
    is_str(jget_str(o, "nope", "d"), "d", "jget_str: absent gives the default");
    is_str(jget_str(o, "i", "d"), "d",
           "jget_str: another type gives the default");
    ok(jget_str(o, "nope", NULL) == NULL, "jget_str: the default may be NULL");
    json_t *arr = json_array();
    ok(jget_str(NULL, "s", NULL) == NULL && jget_str(arr, "s", "x"),
       "jget_str: NULL or a non-object is read as empty");
    json_decref(arr);
    is_str(jget_strict(o, "s", ""), "text", "jget_strict: a string");
    is_str(jget_strict(o, "nope", ""), "",
           "jget_strict: absent gives the default");
    ok(jget_strict(o, "i", "") == NULL, "jget_strict: another type is NULL");
    ok(jget_strict(o, "null", "") == NULL, "jget_strict: null is NULL");
    ok(jget_strict(o, "nul", "") == NULL,
       "jget_strict: a string with a NUL inside is NULL");
    is_str(jget_str(o, "nul", "d"), "a", "jget_str: ... which jget_str cuts");
    is_int(jget_int(o, "i", -1), 42, "jget_int: an integer");
    is_int(jget_int(o, "s", -1), -1,
           "jget_int: another type gives the default");
    is_int(jget_int(o, "nope", 7), 7, "jget_int: absent gives the default");
    ok(jget_bool(o, "b", false), "jget_bool: true");
    ok(jget_bool(o, "i", true) && !jget_bool(o, "nope", false),
       "jget_bool: another type or absent gives the default");
    json_decref(o);
    return done_testing();
}
