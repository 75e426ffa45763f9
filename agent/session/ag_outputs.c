#include "agent/session/ag_outputs.h"

#include "common/xalloc.h"
#include "kernel-bridge/kb_output.h"

#include <pthread.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern const char ag_outputs_py[]; /* ag_outputs.py */
extern const size_t ag_outputs_py_len;

#define INSTALL_OUTPUT_MAX ((size_t)64 << 10)

static bool
s_is_python(kb_kernel_t *k)
{
    json_t *info = kb_kernel_info(k);
    const char *lang = json_string_value(
        json_object_get(json_object_get(info, "language_info"), "name"));
    return lang && strcmp(lang, "python") == 0;
}

/* The install cell is one line: ag_outputs.py as hex, compiled and run in
 * a namespace of its own. IPython's input transformers tokenize a cell in
 * Python before running it; for the 23 KB source itself that cost 30-40
 * ms of kernel CPU per session (4x the rest of the install), on the path
 * of every session's first cell. A string literal is one token. */
#define CELL_HEAD "exec(compile(bytes.fromhex("
#define CELL_TAIL                                                              \
    ").decode(), '<jupyter-agent outputs>', 'exec'), {'__name__': "            \
    "'__main__'})"

static char *s_cell; /* the install cell, built once */
static pthread_once_t s_cell_once = PTHREAD_ONCE_INIT;

static void
s_build_cell(void)
{
    char *hex = xmalloc(2 * ag_outputs_py_len + 1);
    sodium_bin2hex(hex, 2 * ag_outputs_py_len + 1,
                   (const unsigned char *)ag_outputs_py, ag_outputs_py_len);
    s_cell = xasprintf("%s'%s'%s", CELL_HEAD, hex, CELL_TAIL);
    free(hex);
}

const char *
ag_outputs_cell(void)
{
    pthread_once(&s_cell_once, s_build_cell);
    return s_cell;
}

int
ag_outputs_install(kb_kernel_t *k, int timeout_ms, err_t *err)
{
    if (!s_is_python(k))
        return 0;
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    kb_output_t *out = kb_output_new(NULL, INSTALL_OUTPUT_MAX);
    int rc = kb_kernel_execute(k, ag_outputs_cell(), &xo, timeout_ms, out, NULL,
                               err);
    if (rc == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            const char *type =
                json_string_value(json_object_get(o, "output_type"));
            if (type && strcmp(type, "error") == 0) {
                err_set(err, ERR_KERNEL,
                        "installing the chart and table formatters raised "
                        "%s: %s",
                        json_string_value(json_object_get(o, "ename")),
                        json_string_value(json_object_get(o, "evalue")));
                rc = -1;
                break;
            }
        }
    }
    kb_output_destroy(&out);
    return rc;
}

int
ag_outputs_timeout(int cell_ms)
{
    return cell_ms > 0 && cell_ms < AG_OUTPUTS_TIMEOUT_MS
               ? cell_ms
               : AG_OUTPUTS_TIMEOUT_MS;
}

int
ag_outputs_on_restart(kb_kernel_t *k, void *arg, err_t *err)
{
    int ms = arg ? (int)(intptr_t)arg : AG_OUTPUTS_TIMEOUT_MS;
    return ag_outputs_install(k, ms, err);
}
