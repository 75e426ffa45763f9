/*
 * Fuzz target: arbitrary bytes as JSON, read by nb_json_loadb (yajl's
 * parser first, jansson for what it declines) and by
 * nb_json_loadb_reference (jansson's parser alone). The yajl-* inputs are
 * where yajl reads more than jansson does (\v and \f as whitespace,
 * lax UTF-8, a high surrogate escape with any escape after it).
 *
 * Both must agree on every input: both refuse it with the same error
 * (line, column, text), or both read it into values that are equal and
 * write the same bytes. A difference aborts.
 */
#include "notebook-io/nb_json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t e1, e2;
    json_t *fast = nb_json_loadb((const char *)data, size, &e1);
    json_t *ref = nb_json_loadb_reference((const char *)data, size, &e2);

    if (!fast != !ref)
        abort(); /* one read what the other refused */
    if (!fast) {
        if (e1.line != e2.line || e1.column != e2.column ||
            strcmp(e1.text, e2.text) != 0)
            abort();
        return 0;
    }
    if (!json_equal(fast, ref))
        abort();
    size_t n1, n2;
    char *t1 = nb_json_dumps(fast, &n1), *t2 = nb_json_dumps(ref, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1) != 0)
        abort(); /* e.g. -0.0 against 0.0, or an integer against a real */
    free(t1);
    free(t2);
    json_decref(fast);
    json_decref(ref);
    return 0;
}
