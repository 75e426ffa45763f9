#include "notebook-io/nb_record.h"

#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

struct nb_record {
    nb_notebook_t *nb; /* owned; the notebook recorded so far */
};

nb_record_t *
nb_record_new(void)
{
    nb_record_t *rec = xcalloc(1, sizeof *rec);
    rec->nb = nb_notebook_new();
    return rec;
}

void
nb_record_destroy(nb_record_t **p)
{
    if (!p || !*p)
        return;
    nb_notebook_destroy(&(*p)->nb);
    free(*p);
    *p = NULL;
}

int
nb_record_set_kernel(nb_record_t *rec, const json_t *kernel_info_reply,
                     const char *kernelspec_name, const char *display_name)
{
    json_t *li = json_object_get(kernel_info_reply, "language_info");
    const char *language = json_string_value(json_object_get(li, "name"));
    json_t *ks;

    if (!kernelspec_name)
        return -1;
    ks = json_pack("{s:s, s:s}", "name", kernelspec_name, "display_name",
                   display_name ? display_name : kernelspec_name);
    if (!ks)
        return -1; /* invalid UTF-8 in a name */
    if (language)
        json_object_set_new(ks, "language", json_string(language));
    nb_notebook_set_metadata(rec->nb, "kernelspec", ks);
    if (json_is_object(li))
        nb_notebook_set_metadata(rec->nb, "language_info", json_deep_copy(li));
    return 0;
}

json_t *
nb_record_add_markdown(nb_record_t *rec, const char *text)
{
    json_t *cell = nb_cell_new_markdown(text);
    nb_notebook_append(rec->nb, cell);
    return cell;
}

int
nb_record_set_timing(json_t *cell, const char *key, const char *iso)
{
    json_t *md = json_object_get(cell, "metadata"), *ex;
    if (!json_is_object(md) || !key || !iso)
        return -1;
    ex = json_object_get(md, "execution");
    if (!json_is_object(ex)) {
        ex = json_object();
        json_object_set_new(md, "execution", ex);
    }
    return json_object_set_new(ex, key, json_string(iso));
}

json_t *
nb_record_add_code(nb_record_t *rec, const char *source, json_t *outputs,
                   int execution_count, const char *start_iso,
                   const char *end_iso)
{
    json_t *cell;

    if (outputs && !json_is_array(outputs))
        return NULL;
    cell = nb_cell_new_code(source);
    if (outputs)
        json_object_set(cell, "outputs", outputs); /* the same array */
    if (execution_count >= 0)
        json_object_set_new(cell, "execution_count",
                            json_integer(execution_count));
    if (start_iso) {
        nb_record_set_timing(cell, "iopub.status.busy", start_iso);
        nb_record_set_timing(cell, "iopub.execute_input", start_iso);
    }
    if (end_iso) {
        nb_record_set_timing(cell, "shell.execute_reply", end_iso);
        nb_record_set_timing(cell, "iopub.status.idle", end_iso);
    }
    nb_notebook_append(rec->nb, cell);
    return cell;
}

int
nb_record_set_metadata(nb_record_t *rec, const char *key, json_t *value)
{
    return nb_notebook_set_metadata(rec->nb, key, value);
}

nb_notebook_t *
nb_record_notebook(nb_record_t *rec)
{
    return rec->nb;
}

int
nb_record_save(nb_record_t *rec, const char *path, err_t *err)
{
    return nb_notebook_write_file(rec->nb, path, err);
}
