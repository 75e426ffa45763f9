/*
 * nb_notebook_v3: reading an nbformat 3 notebook, upgraded to 4 as
 * nbformat.v4.convert.upgrade does. Part of module nb_notebook (its
 * reader calls nb_notebook_upgrade_v3 when "nbformat" is 3).
 */
#include "notebook-io/nb_notebook.h"

#include "common/buf.h"
#include "common/xalloc.h"
#include "notebook-io/nb_json.h"
#include "notebook-io/nb_notebook_impl.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* nbformat.v3's _join_lines: lines from splitlines(True) concatenate,
 * lines from splitlines() (no line ends) join with "\n". */
static void
s_join3(json_t *obj, const char *key)
{
    json_t *list = json_object_get(obj, key), *item;
    size_t i;
    if (!json_is_array(list))
        return;
    json_array_foreach(list, i, item) if (!nb_is_text(item)) return;
    const char *first = json_string_value(json_array_get(list, 0));
    size_t fl = first ? strlen(first) : 0;
    bool ends = fl && (first[fl - 1] == '\n' || first[fl - 1] == '\r');
    buf_t b;
    buf_init(&b, 0);
    json_array_foreach(list, i, item)
    {
        if (i && !ends)
            buf_append(&b, "\n", 1);
        buf_append(&b, json_string_value(item), json_string_length(item));
    }
    json_object_set_new(obj, key, json_stringn_nocheck(buf_cstr(&b), b.len));
    buf_release(&b);
}

/* Move obj[from] to obj[to] (when present). */
static void
s_rename(json_t *obj, const char *from, const char *to)
{
    json_t *v = json_object_get(obj, from);
    if (!v)
        return;
    json_object_set(obj, to, v);
    json_object_del(obj, from);
}

/* convert.to_mime_key: v3 aliases to mime types. */
static void
s_to_mime_key(json_t *d)
{
    static const char *const map[][2] = {
        {"text", "text/plain"},       {"html", "text/html"},
        {"svg", "image/svg+xml"},     {"png", "image/png"},
        {"jpeg", "image/jpeg"},       {"latex", "text/latex"},
        {"json", "application/json"}, {"javascript", "application/javascript"}};
    if (!json_is_object(d))
        return;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        s_rename(d, map[i][0], map[i][1]);
}

/* convert.upgrade_output, after v3's rejoin_lines. */
static int
s_upgrade_output3(json_t *o, const char *origin, size_t cell, err_t *err)
{
    static const char *const multiline[] = {"text",  "html",       "svg",
                                            "latex", "javascript", "json"};
    const char *type = json_string_value(json_object_get(o, "output_type"));
    if (!json_is_object(o) || !type)
        return nb_notebook_bad(
            err, origin, "cell %zu (code): an output has no \"output_type\"",
            cell);
    for (size_t i = 0; i < sizeof multiline / sizeof multiline[0]; i++)
        s_join3(o, multiline[i]);
    if (!strcmp(type, "pyout") || !strcmp(type, "display_data")) {
        if (!json_object_get(o, "metadata"))
            json_object_set_new(o, "metadata", json_object());
        if (!strcmp(type, "pyout")) {
            json_object_set_new(o, "output_type",
                                json_string("execute_result"));
            json_t *n = json_object_get(o, "prompt_number");
            json_object_set(o, "execution_count", n ? n : json_null());
            json_object_del(o, "prompt_number");
        }
        json_t *data = json_object();
        const char *key;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(o, tmp, key, v)
        {
            if (!strcmp(key, "output_type") ||
                !strcmp(key, "execution_count") || !strcmp(key, "metadata"))
                continue;
            json_object_set(data, key, v);
            json_object_del(o, key);
        }
        s_to_mime_key(data);
        json_object_set_new(o, "data", data);
        s_to_mime_key(json_object_get(o, "metadata"));
        json_t *js = json_object_get(data, "application/json");
        if (json_is_string(js)) {
            json_error_t jerr;
            json_t *parsed = nb_json_loadb(json_string_value(js),
                                           json_string_length(js), &jerr);
            if (!parsed)
                return nb_notebook_bad(
                    err, origin,
                    "cell %zu (code): application/json output is "
                    "not JSON: %s",
                    cell, jerr.text);
            json_object_set_new(data, "application/json", parsed);
        }
    } else if (!strcmp(type, "pyerr")) {
        json_object_set_new(o, "output_type", json_string("error"));
    } else if (!strcmp(type, "stream")) {
        json_t *name = json_object_get(o, "stream");
        if (name) {
            json_object_set(o, "name", name);
            json_object_del(o, "stream");
        } else {
            json_object_set_new(o, "name", json_string("stdout"));
        }
    }
    return 0;
}

/* Length of the line terminator ending s[pos..end), as splitlines() drops
 * it. */
static size_t
s_terminator(const char *s, size_t pos, size_t end)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = end - pos;
    if (n >= 2 && u[end - 2] == '\r' && u[end - 1] == '\n')
        return 2;
    if (n >= 1 && strchr("\n\r\v\f\x1c\x1d\x1e", u[end - 1]) && u[end - 1])
        return 1;
    if (n >= 2 && u[end - 2] == 0xC2 && u[end - 1] == 0x85)
        return 2;
    if (n >= 3 && u[end - 3] == 0xE2 && u[end - 2] == 0x80 &&
        (u[end - 1] == 0xA8 || u[end - 1] == 0xA9))
        return 3;
    return 0;
}

/* convert.upgrade_cell (with v3's rejoin_lines first). */
static int
s_upgrade_cell3(json_t *cell, size_t i, const char *origin, err_t *err)
{
    if (!json_is_object(cell))
        return nb_notebook_bad(err, origin, "cell %zu is not a JSON object", i);
    const char *type = nb_cell_type(cell);
    if (!type)
        return nb_notebook_bad(err, origin, "cell %zu has no \"cell_type\"", i);
    if (!json_object_get(cell, "metadata"))
        json_object_set_new(cell, "metadata", json_object());
    json_object_del(cell, "id"); /* upgrade_cell gives every cell a new one */
    if (!strcmp(type, "code")) {
        s_join3(cell, "input");
        json_object_del(cell, "language");
        json_t *col = json_object_get(cell, "collapsed");
        if (col) {
            json_object_set(json_object_get(cell, "metadata"), "collapsed",
                            col);
            json_object_del(cell, "collapsed");
        }
        if (json_object_get(cell, "input"))
            s_rename(cell, "input", "source");
        else
            json_object_set_new(cell, "source", json_string(""));
        json_t *n = json_object_get(cell, "prompt_number");
        json_object_set(cell, "execution_count", n ? n : json_null());
        json_object_del(cell, "prompt_number");
        json_t *outs = json_object_get(cell, "outputs"), *o;
        size_t j;
        if (!json_is_array(outs))
            return nb_notebook_bad(
                err, origin, "cell %zu (code) has no \"outputs\" list", i);
        json_array_foreach(
            outs, j, o) if (s_upgrade_output3(o, origin, i, err)) return -1;
        return 0;
    }
    s_join3(cell, "source");
    s_join3(cell, "rendered");
    if (!strcmp(type, "heading")) {
        json_t *lv = json_object_get(cell, "level");
        json_int_t level = json_is_integer(lv) ? json_integer_value(lv) : 1;
        json_object_del(cell, "level");
        const char *src = json_string_value(json_object_get(cell, "source"));
        size_t len = src ? strlen(src) : 0, pos = 0;
        buf_t b;
        buf_init(&b, 0);
        for (json_int_t k = 0; k < level && k < 1000; k++)
            buf_append(&b, "#", 1);
        buf_append(&b, " ", 1);
        while (pos < len) { /* " ".join(source.splitlines()) */
            size_t end = nb_json_line_end(src, len, pos);
            if (pos)
                buf_append(&b, " ", 1);
            buf_append(&b, src + pos, end - pos - s_terminator(src, pos, end));
            pos = end;
        }
        json_object_set_new(cell, "source",
                            json_stringn_nocheck(buf_cstr(&b), b.len));
        buf_release(&b);
        json_object_set_new(cell, "cell_type", json_string("markdown"));
    } else if (!strcmp(type, "html")) {
        json_object_set_new(cell, "cell_type", json_string("markdown"));
    }
    return 0;
}

/* nbformat.v4.convert.upgrade from version 3: worksheets flattened into
 * cells, every cell upgraded; the caller makes it 4.5 with fresh ids. */
int
nb_notebook_upgrade_v3(json_t *root, const char *origin, err_t *err)
{
    json_t *md = json_object_get(root, "metadata");
    if (!json_is_object(md))
        return nb_notebook_bad(err, origin, "no \"metadata\" object");
    json_object_del(root, "orig_nbformat");
    json_object_del(root, "orig_nbformat_minor");
    json_object_del(md, "name");
    json_object_del(md, "signature");
    json_t *cells = json_array(), *ws, *cell;
    size_t i, j, n = 0;
    json_array_foreach(json_object_get(root, "worksheets"), i, ws)
    {
        json_array_foreach(json_object_get(ws, "cells"), j, cell)
        {
            if (s_upgrade_cell3(cell, ++n, origin, err)) {
                json_decref(cells);
                return -1;
            }
            json_array_append(cells, cell);
        }
    }
    json_object_del(root, "worksheets");
    json_object_set_new(root, "cells", cells);
    json_object_set_new(root, "nbformat", json_integer(4));
    json_object_set_new(root, "nbformat_minor", json_integer(0));
    return 0;
}
