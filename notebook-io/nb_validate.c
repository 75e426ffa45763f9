/*
 * nb_validate: the basic nbformat 4.5 schema check behind
 * nb_notebook_validate (declared in nb_notebook.h). The authoritative check
 * is nbformat.validate, which the interop tests run on every notebook we
 * write; this one catches our own mistakes without Python.
 */
#include "notebook-io/nb_notebook.h"

#include <jansson.h>
#include <string.h>

/* ---- validation ------------------------------------------------------- */

static int
s_is_multiline(const json_t *v)
{
    size_t i;
    json_t *item;
    if (json_is_string(v))
        return 1;
    if (!json_is_array(v))
        return 0;
    json_array_foreach((json_t *)v, i,
                       item) if (!json_is_string(item)) return 0;
    return 1;
}

static int
s_valid_count(const json_t *v)
{
    return json_is_null(v) ||
           (json_is_integer(v) && json_integer_value(v) >= 0);
}

static int
s_validate_output(const json_t *o, size_t i, size_t j, err_t *err)
{
    const char *t = json_string_value(json_object_get(o, "output_type"));
    const char *why = NULL;

    if (!t)
        why = "has no output_type";
    else if (!strcmp(t, "stream")) {
        if (!json_is_string(json_object_get(o, "name")) ||
            !s_is_multiline(json_object_get(o, "text")))
            why = "(stream) needs a string \"name\" and \"text\"";
    } else if (!strcmp(t, "display_data") || !strcmp(t, "execute_result")) {
        if (!json_is_object(json_object_get(o, "data")) ||
            !json_is_object(json_object_get(o, "metadata")))
            why = "needs \"data\" and \"metadata\" objects";
        else if (!strcmp(t, "execute_result") &&
                 !s_valid_count(json_object_get(o, "execution_count")))
            why = "(execute_result) needs an \"execution_count\"";
    } else if (!strcmp(t, "error")) {
        json_t *tb = json_object_get(o, "traceback");
        if (!json_is_string(json_object_get(o, "ename")) ||
            !json_is_string(json_object_get(o, "evalue")) ||
            !json_is_array(tb) || !s_is_multiline(tb))
            why = "(error) needs \"ename\", \"evalue\" and a \"traceback\" "
                  "list of strings";
    } else
        why = "has an unknown output_type";
    if (why)
        return err_set(err, ERR_USAGE, "cell %zu, output %zu %s", i + 1, j + 1,
                       why);
    return 0;
}

int
nb_notebook_validate(const nb_notebook_t *nb, err_t *err)
{
    json_t *root = nb_notebook_json(nb), *cells = nb_notebook_cells(nb), *cell,
           *seen;
    size_t i, j;
    int rc = -1;

    if (json_integer_value(json_object_get(root, "nbformat")) != 4 ||
        !json_is_integer(json_object_get(root, "nbformat_minor")) ||
        json_integer_value(json_object_get(root, "nbformat_minor")) < 5)
        return err_set(err, ERR_USAGE, "not an nbformat 4.5 notebook");
    if (!json_is_object(nb_notebook_metadata(nb)) || !json_is_array(cells))
        return err_set(err, ERR_USAGE,
                       "notebook needs a \"metadata\" object and a \"cells\" "
                       "list");
    seen = json_object();
    json_array_foreach(cells, i, cell)
    {
        const char *type = nb_cell_type(cell), *id = nb_cell_id(cell);
        json_t *outputs, *o;
        if (!nb_cell_id_valid(id)) {
            err_set(err, ERR_USAGE,
                    "cell %zu has no valid \"id\" (1-64 of a-z A-Z 0-9 - _)",
                    i + 1);
            goto out;
        }
        if (json_object_get(seen, id)) {
            err_set(err, ERR_USAGE, "cell %zu repeats the id \"%s\"", i + 1,
                    id);
            goto out;
        }
        json_object_set_new(seen, id, json_true());
        if (!type || (strcmp(type, "code") && strcmp(type, "markdown") &&
                      strcmp(type, "raw"))) {
            err_set(err, ERR_USAGE,
                    "cell %zu: \"cell_type\" must be code, markdown or raw",
                    i + 1);
            goto out;
        }
        if (!json_is_object(json_object_get(cell, "metadata")) ||
            !s_is_multiline(json_object_get(cell, "source"))) {
            err_set(err, ERR_USAGE,
                    "cell %zu needs a \"metadata\" object and a \"source\"",
                    i + 1);
            goto out;
        }
        if (strcmp(type, "code"))
            continue;
        if (json_object_get(cell, "attachments")) {
            err_set(err, ERR_USAGE, "cell %zu: code cells have no attachments",
                    i + 1);
            goto out;
        }
        outputs = json_object_get(cell, "outputs");
        if (!json_is_array(outputs) ||
            !s_valid_count(json_object_get(cell, "execution_count")) ||
            !json_object_get(cell, "execution_count")) {
            err_set(err, ERR_USAGE,
                    "cell %zu (code) needs an \"outputs\" list and an "
                    "\"execution_count\" (integer or null)",
                    i + 1);
            goto out;
        }
        json_array_foreach(outputs, j,
                           o) if (s_validate_output(o, i, j, err)) goto out;
    }
    rc = 0;
out:
    json_decref(seen);
    return rc;
}
