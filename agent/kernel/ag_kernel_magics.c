/*
 * ag_kernel_magics: the line magics that act on the session as a whole:
 * %export (the session as a notebook) and %model (show or switch the
 * model). %reset lives with the session (ag_kernel.c), %upload and
 * %download in ag_kernel_files.c.
 */
#include "agent/kernel/ag_kernel_impl.h"

#include "agent/llm/ag_provider.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_server.h"
#include "notebook-io/nb_notebook.h"
#include "notebook-io/nb_record.h"

#include <stdlib.h>

/* %export PATH.ipynb: the whole session so far as a notebook. */
void
ag_kernel_export(ag_kernel_t *k, const char *path)
{
    err_t err = {0};
    if (!*path) {
        ag_kernel_error(k, "UsageError",
                        "%export needs a file name, e.g. %export "
                        "report.ipynb");
        return;
    }
    if (nb_record_save(k->record, path, &err) != 0) {
        ag_kernel_error(k, ag_kernel_ename(err.code), err.text);
        return;
    }
    char *msg =
        xasprintf("Wrote the session (%zu cells) to %s\n",
                  nb_notebook_ncells(nb_record_notebook(k->record)), path);
    kb_server_stream(k->server, k->cell, "stdout", msg);
    free(msg);
}

/* %model [SPEC]: show, or switch, the model; the conversation carries on
 * (the loop picks the new model up at its next turn). */
void
ag_kernel_model_magic(ag_kernel_t *k, const char *spec)
{
    if (!*spec) {
        /* The model the next plain cell would use, resolved as the loop
         * resolves it (--model, else the environment). */
        err_t err = {0};
        ag_provider_t *p = ag_provider_new(k->model, &err);
        char *msg = p ? xasprintf("model: %s%s\n", ag_provider_model(p),
                                  k->model ? "" : " (from the environment)")
                      : xasprintf("model: none usable: %s\n", err.text);
        ag_provider_destroy(&p);
        kb_server_stream(k->server, k->cell, "stdout", msg);
        free(msg);
        return;
    }
    err_t err = {0};
    ag_provider_t *p = ag_provider_new(spec, &err); /* checks it can work */
    if (!p) {
        ag_kernel_error(k, ag_kernel_ename(err.code), err.text);
        return;
    }
    ag_provider_destroy(&p);
    free(k->model_owned);
    k->model_owned = xstrdup(spec);
    k->model = k->model_owned;
    char *msg =
        xasprintf("Model set to %s; the conversation continues.\n", spec);
    kb_server_stream(k->server, k->cell, "stdout", msg);
    free(msg);
}
