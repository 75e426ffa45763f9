/* ag_outputs: the install cell a session's kernel runs is one line (a
 * string literal is a single token for IPython's input transformers, the
 * source itself 23 KB of them) and decodes to ag_outputs.py exactly. That
 * the formatters it installs work is tests/integration/charts.sh. */
#include "agent/session/ag_outputs.h"
#include "tests/tap.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

extern const char ag_outputs_py[];
extern const size_t ag_outputs_py_len;

int
main(void)
{
    const char *cell = ag_outputs_cell();
    ok(cell != NULL, "there is an install cell");
    ok(strchr(cell, '\n') == NULL, "it is one line");
    ok(strlen(cell) < 2 * ag_outputs_py_len + 200,
       "it is the hex source and a short wrapper");
    const char *head = "exec(compile(bytes.fromhex('";
    ok(strncmp(cell, head, strlen(head)) == 0,
       "it runs the source through exec(compile(...))");
    ok(strstr(cell, "{'__name__': '__main__'})") != NULL,
       "in a namespace of its own, not the user's");
    const char *hex = cell + strlen(head);
    const char *end = strchr(hex, '\'');
    size_t bin_len = 0;
    unsigned char *bin = malloc(ag_outputs_py_len + 1);
    int rc = end ? sodium_hex2bin(bin, ag_outputs_py_len + 1, hex,
                                  (size_t)(end - hex), NULL, &bin_len, NULL)
                 : -1;
    ok(rc == 0 && bin_len == ag_outputs_py_len &&
           memcmp(bin, ag_outputs_py, bin_len) == 0,
       "the literal decodes to ag_outputs.py byte for byte (%zu bytes)",
       bin_len);
    free(bin);
    ok(ag_outputs_cell() == cell, "built once");
    return done_testing();
}
