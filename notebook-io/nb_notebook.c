#include "notebook-io/nb_notebook.h"

#include "common/buf.h"
#include "common/fileio.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "notebook-io/nb_json.h"
#include "notebook-io/nb_notebook_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct nb_notebook {
    json_t *root;   /* owned; the document, an object with "cells" (array),
                       "metadata" (object), "nbformat" 4, "nbformat_minor" */
    json_t *ids;    /* owned; object used as a set of the cell ids handed out
                       or seen by read/append, for uniqueness in O(1) */
    int orig_minor; /* nbformat_minor as read; 5 for a new notebook */
    buf_t warnings; /* what nbformat would log but read anyway, one line
                       each; empty when none */
};

/* ---- cells ------------------------------------------------------------ */

/* A JSON string of `s`, with each invalid UTF-8 byte replaced by U+FFFD.
 * New reference. */
static json_t *
s_string_utf8(const char *s)
{
    json_t *j;
    buf_t b;
    size_t n;

    if (!s)
        s = "";
    if ((j = json_string(s)))
        return j;
    buf_init(&b, 0);
    n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq_len((const unsigned char *)s + i, n - i);
        if (len) {
            buf_append(&b, s + i, len);
            i += len;
        } else {
            buf_append(&b, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    j = json_stringn_nocheck(b.data ? b.data : "", b.len);
    buf_release(&b);
    return j;
}

void
nb_cell_id_new(char out[NB_CELL_ID_SIZE])
{
    unsigned char r[4];
    if (sodium_init() < 0)
        abort(); /* no entropy source: nothing safe can run */
    randombytes_buf(r, sizeof r);
    sodium_bin2hex(out, NB_CELL_ID_SIZE, r, sizeof r);
}

int
nb_cell_id_valid(const char *id)
{
    size_t n = 0;
    if (!id)
        return 0;
    for (; id[n]; n++) {
        char c = id[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return 0;
    }
    return n >= 1 && n <= 64;
}

static json_t *
s_cell_new(const char *type, const char *source)
{
    char id[NB_CELL_ID_SIZE];
    nb_cell_id_new(id);
    return json_pack("{s:s, s:s, s:{}, s:o}", "id", id, "cell_type", type,
                     "metadata", "source", s_string_utf8(source));
}

json_t *
nb_cell_new_code(const char *source)
{
    json_t *cell = s_cell_new("code", source);
    json_object_set_new(cell, "execution_count", json_null());
    json_object_set_new(cell, "outputs", json_array());
    return cell;
}

json_t *
nb_cell_new_markdown(const char *source)
{
    return s_cell_new("markdown", source);
}

json_t *
nb_cell_new_raw(const char *source)
{
    return s_cell_new("raw", source);
}

const char *
nb_cell_type(const json_t *cell)
{
    return json_string_value(json_object_get(cell, "cell_type"));
}

const char *
nb_cell_source(const json_t *cell)
{
    return json_string_value(json_object_get(cell, "source"));
}

const char *
nb_cell_id(const json_t *cell)
{
    return json_string_value(json_object_get(cell, "id"));
}

/* ---- the notebook object ---------------------------------------------- */

static nb_notebook_t *
s_wrap(json_t *root, int orig_minor)
{
    nb_notebook_t *nb = xcalloc(1, sizeof *nb);
    nb->root = root;
    nb->ids = json_object();
    nb->orig_minor = orig_minor;
    buf_init(&nb->warnings, 0);
    return nb;
}

nb_notebook_t *
nb_notebook_new(void)
{
    json_t *root = json_pack("{s:[], s:{}, s:i, s:i}", "cells", "metadata",
                             "nbformat", 4, "nbformat_minor", 5);
    return s_wrap(root, 5);
}

void
nb_notebook_destroy(nb_notebook_t **p)
{
    if (!p || !*p)
        return;
    json_decref((*p)->root);
    json_decref((*p)->ids);
    buf_release(&(*p)->warnings);
    free(*p);
    *p = NULL;
}

json_t *
nb_notebook_json(const nb_notebook_t *nb)
{
    return nb->root;
}

json_t *
nb_notebook_metadata(const nb_notebook_t *nb)
{
    return json_object_get(nb->root, "metadata");
}

json_t *
nb_notebook_cells(const nb_notebook_t *nb)
{
    return json_object_get(nb->root, "cells");
}

size_t
nb_notebook_ncells(const nb_notebook_t *nb)
{
    return json_array_size(nb_notebook_cells(nb));
}

json_t *
nb_notebook_cell(const nb_notebook_t *nb, size_t i)
{
    return json_array_get(nb_notebook_cells(nb), i);
}

int
nb_notebook_orig_minor(const nb_notebook_t *nb)
{
    return nb->orig_minor;
}

/* Give `cell` an id unless it has a string id not yet in the set (or, with
 * `strict`, one that is also valid), and record it in the set. */
static void
s_claim_id(nb_notebook_t *nb, json_t *cell, int strict)
{
    json_t *jid = json_object_get(cell, "id");
    const char *id = json_string_value(jid);
    char fresh[NB_CELL_ID_SIZE];

    if (jid && !id && !strict)
        return; /* a non-string id in a 4.5 notebook: kept, validate says */
    if (id && !json_object_get(nb->ids, id) &&
        (!strict || nb_cell_id_valid(id))) {
        json_object_set_new(nb->ids, id, json_true());
        return;
    }
    do
        nb_cell_id_new(fresh);
    while (json_object_get(nb->ids, fresh));
    json_object_set_new(cell, "id", json_string(fresh));
    json_object_set_new(nb->ids, fresh, json_true());
}

int
nb_notebook_append(nb_notebook_t *nb, json_t *cell)
{
    if (!json_is_object(cell)) {
        json_decref(cell);
        return -1;
    }
    s_claim_id(nb, cell, 1);
    return json_array_append_new(nb_notebook_cells(nb), cell);
}

int
nb_notebook_set_metadata(nb_notebook_t *nb, const char *key, json_t *value)
{
    json_t *md = nb_notebook_metadata(nb);
    if (!json_is_object(md) || !key || !value) {
        json_decref(value);
        return -1;
    }
    return json_object_set_new(md, key, value);
}

/* ---- reading ---------------------------------------------------------- */

/* If obj[key] is a list of strings, replace it by their concatenation.
 * Returns 0 if joined or not a list, -1 if a list holding a non-string. */
static int
s_join(json_t *obj, const char *key)
{
    json_t *list = json_object_get(obj, key), *item;
    size_t i;
    buf_t b;

    if (!json_is_array(list))
        return 0;
    json_array_foreach(list, i, item) if (!nb_is_text(item)) return -1;
    buf_init(&b, 0);
    json_array_foreach(list, i, item)
        buf_append(&b, json_string_value(item), json_string_length(item));
    /* Pieces of valid UTF-8 concatenate to valid UTF-8. */
    json_object_set_new(obj, key, json_stringn_nocheck(buf_cstr(&b), b.len));
    buf_release(&b);
    return 0;
}

/* nbformat's _is_json_mime. */
static int
s_is_json_mime(const char *mime)
{
    size_t n = strlen(mime);
    return strcmp(mime, "application/json") == 0 ||
           (strncmp(mime, "application/", 12) == 0 && n >= 5 &&
            strcmp(mime + n - 5, "+json") == 0);
}

/* nbformat's _rejoin_mimebundle. */
static void
s_join_bundle(json_t *bundle)
{
    const char *mime;
    json_t *value;
    if (!json_is_object(bundle))
        return;
    json_object_foreach(bundle, mime, value) if (!s_is_json_mime(mime))
        s_join(bundle, mime); /* a list with non-strings is left alone */
}

int
nb_notebook_bad(err_t *err, const char *origin, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return err_set(err, ERR_USAGE, "%s: %s", origin, what);
}

/* Check what the model relies on in cell `i` and normalise it in place.
 * What nbformat reads but its validator reports goes into `warn`. */
static int
s_read_cell(json_t *cell, size_t i, const char *origin, buf_t *warn, err_t *err)
{
    json_t *md, *outputs, *output, *attachments, *att;
    const char *type, *name;
    size_t j;

    if (!json_is_object(cell))
        return nb_notebook_bad(err, origin, "cell %zu is not a JSON object",
                               i + 1);
    type = nb_cell_type(cell);
    if (!type)
        return nb_notebook_bad(err, origin, "cell %zu has no \"cell_type\"",
                               i + 1);
    md = json_object_get(cell, "metadata");
    if (!json_is_object(md))
        return nb_notebook_bad(err, origin,
                               "cell %zu (%s) has no \"metadata\" object",
                               i + 1, type);
    /* nbformat reads a cell without a usable source (and writes it back as
     * it was); its validator logs the notebook as invalid. */
    if (!json_object_get(cell, "source"))
        buf_printf(warn,
                   "%s: cell %zu (%s) has no \"source\"; read as empty, "
                   "kept as it is (not valid nbformat 4)\n",
                   origin, i + 1, type);
    else if (s_join(cell, "source")) /* nbformat's "".join fails too */
        return nb_notebook_bad(
            err, origin,
            "cell %zu (%s): \"source\" must be a string or a list "
            "of strings",
            i + 1, type);
    else if (!json_is_string(json_object_get(cell, "source")))
        buf_printf(warn,
                   "%s: cell %zu (%s): \"source\" is not a string or a "
                   "list of strings; read as empty, kept as it is (not valid "
                   "nbformat 4)\n",
                   origin, i + 1, type);
    json_object_del(md, "trusted");

    attachments = json_object_get(cell, "attachments");
    if (json_is_object(attachments))
        json_object_foreach(attachments, name, att) s_join_bundle(att);

    if (strcmp(type, "code") != 0)
        return 0;
    outputs = json_object_get(cell, "outputs");
    if (!json_is_array(outputs))
        return nb_notebook_bad(
            err, origin, "cell %zu (code) has no \"outputs\" list", i + 1);
    json_array_foreach(outputs, j, output)
    {
        const char *otype =
            json_string_value(json_object_get(output, "output_type"));
        if (!otype)
            return nb_notebook_bad(
                err, origin,
                "cell %zu (code), output %zu has no \"output_type\"", i + 1,
                j + 1);
        if (!strcmp(otype, "execute_result") || !strcmp(otype, "display_data"))
            s_join_bundle(json_object_get(output, "data"));
        else if (*otype)
            s_join(output, "text");
    }
    return 0;
}

const char *
nb_notebook_warnings(const nb_notebook_t *nb)
{
    return nb->warnings.len ? nb->warnings.data : NULL;
}

/* The elements of the top-level "cells" array, counted without building
 * anything, up to one past `cap`. Strings are skipped with their escapes,
 * so a "cells" or a bracket inside one does not count. For input that is
 * not JSON the count means nothing: the parser refuses it anyway. */
static size_t
s_count_cells(const char *d, size_t len, size_t cap)
{
    int depth = 0;
    bool cells_next = false; /* the member being read is "cells" */
    bool in_cells = false;   /* inside its array (depth 2) */
    bool pending = false;    /* an element began since the last comma */
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = d[i];
        bool here = in_cells && depth == 2;
        if (c == '"') {
            size_t s = ++i;
            while (i < len && d[i] != '"')
                i += d[i] == '\\' ? 2 : 1;
            if (depth == 1) {
                size_t j = i + 1;
                while (j < len && strchr(" \t\r\n", d[j]))
                    j++;
                if (j < len && d[j] == ':')
                    cells_next = i - s == 5 && memcmp(d + s, "cells", 5) == 0;
            }
            pending |= here;
        } else if (c == '{' || c == '[') {
            pending |= here;
            if (++depth == 2 && c == '[' && cells_next)
                in_cells = true;
        } else if (c == '}' || c == ']') {
            if (here)
                return n + pending;
            depth--;
        } else if (c == ',') {
            if (here) {
                n += pending;
                pending = false;
                if (n > cap)
                    return n;
            } else if (depth == 1) {
                cells_next = false;
            }
        } else if (here && !strchr(" \t\r\n", c)) {
            pending = true; /* a number or a literal */
        }
    }
    return n + pending;
}

static nb_notebook_t *s_read_mem(const char *data, size_t len,
                                 const char *origin, size_t max_cells,
                                 err_t *err);

nb_notebook_t *
nb_notebook_read_mem(const char *data, size_t len, const char *origin,
                     err_t *err)
{
    return s_read_mem(data, len, origin, NB_NOTEBOOK_DEFAULT_MAX_CELLS, err);
}

static int
s_too_many_cells(const char *origin, size_t max_cells, err_t *err)
{
    return err_set(err, ERR_USAGE,
                   "%s: more than %zu cells, over the cap on cells; raise it "
                   "(run --max-cells N) if you trust the notebook",
                   origin, max_cells);
}

static nb_notebook_t *
s_read_mem(const char *data, size_t len, const char *origin, size_t max_cells,
           err_t *err)
{
    json_error_t jerr;
    json_t *root = NULL, *v, *md, *cells, *cell;
    nb_notebook_t *nb = NULL;
    json_int_t major, minor;
    size_t i;

    if (!origin)
        origin = "notebook";
    if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0)
        data += 3, len -= 3;
    buf_t warn;
    buf_init(&warn, 0);
    if (max_cells && s_count_cells(data, len, max_cells) > max_cells) {
        s_too_many_cells(origin, max_cells, err);
        goto out;
    }
    root = nb_json_loadb(data, len, &jerr);
    if (!root) {
        err_set(err, ERR_USAGE, "%s: invalid JSON at line %d, column %d: %s",
                origin, jerr.line, jerr.column, jerr.text);
        goto out;
    }
    if (!json_is_object(root)) {
        nb_notebook_bad(err, origin,
                        "not a notebook (the top level is not an object)");
        goto out;
    }
    v = json_object_get(root, "nbformat");
    if (!v) {
        nb_notebook_bad(err, origin,
                        "not a notebook (no \"nbformat\" version)");
        goto out;
    }
    if (!json_is_integer(v)) {
        nb_notebook_bad(err, origin, "\"nbformat\" must be an integer");
        goto out;
    }
    major = json_integer_value(v);
    if (major == 3) {
        if (nb_notebook_upgrade_v3(root, origin, err))
            goto out;
        buf_printf(&warn, "%s: nbformat 3, upgraded to 4.5 as nbformat does\n",
                   origin);
    } else if (major < 4) {
        err_set(err, ERR_USAGE,
                "%s is nbformat %" JSON_INTEGER_FORMAT "; convert it with "
                "'jupyter nbconvert --to notebook --nbformat 4'",
                origin, major);
        goto out;
    }
    if (major > 4) {
        err_set(err, ERR_USAGE,
                "%s is nbformat %" JSON_INTEGER_FORMAT ", newer than the "
                "nbformat 4 this program reads; save it as nbformat 4",
                origin, major);
        goto out;
    }
    v = json_object_get(root, "nbformat_minor");
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        nb_notebook_bad(err, origin,
                        "no \"nbformat_minor\" (a non-negative integer)");
        goto out;
    }
    minor = json_integer_value(v);
    md = json_object_get(root, "metadata");
    if (!json_is_object(md)) {
        nb_notebook_bad(err, origin, "no \"metadata\" object");
        goto out;
    }
    cells = json_object_get(root, "cells");
    if (!json_is_array(cells)) {
        nb_notebook_bad(err, origin, "no \"cells\" list");
        goto out;
    }
    if (max_cells && json_array_size(cells) > max_cells) { /* nbformat 3 */
        s_too_many_cells(origin, max_cells, err);
        goto out;
    }
    json_array_foreach(
        cells, i, cell) if (s_read_cell(cell, i, origin, &warn, err)) goto out;

    /* nbformat's strip_transient. */
    json_object_del(md, "orig_nbformat");
    json_object_del(md, "orig_nbformat_minor");
    json_object_del(md, "signature");

    nb = s_wrap(root, minor > 1000 ? 1000 : (int)minor);
    root = NULL;
    buf_append(&nb->warnings, warn.data ? warn.data : "", warn.len);
    if (minor < 5) /* nbformat.v4.upgrade: 4.0-4.4 -> 4.5 with ids */
        json_object_set_new(nb->root, "nbformat_minor", json_integer(5));
    json_array_foreach(cells, i, cell) s_claim_id(nb, cell, minor < 5);
out:
    buf_release(&warn);
    json_decref(root);
    return nb;
}

nb_notebook_t *
nb_notebook_read_file(const char *path, err_t *err)
{
    return nb_notebook_read_path(path, NB_NOTEBOOK_DEFAULT_MAX_BYTES, err);
}

nb_notebook_t *
nb_notebook_read_path(const char *path, size_t max_bytes, err_t *err)
{
    return nb_notebook_read_capped(path, max_bytes, 0, err);
}

nb_notebook_t *
nb_notebook_read_capped(const char *path, size_t max_bytes, size_t max_cells,
                        err_t *err)
{
    if (!max_cells)
        max_cells = NB_NOTEBOOK_DEFAULT_MAX_CELLS;
    nb_notebook_t *nb = NULL;
    char *data = NULL;
    struct stat st;
    size_t got = 0;
    /* O_NONBLOCK: opening a FIFO nobody writes to must not hang us; the
     * fstat below then refuses it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

    if (fd < 0) {
        err_errno(err, ERR_USAGE, "%s: cannot open notebook", path);
        goto out;
    }
    if (fstat(fd, &st) < 0) {
        err_errno(err, ERR_USAGE, "%s: cannot stat notebook", path);
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        err_set(err, ERR_USAGE, "%s: is a directory, not a notebook", path);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, ERR_USAGE,
                "%s: is not a regular file (a FIFO, socket or device); save "
                "the notebook to a file and run that",
                path);
        goto out;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        err_set(err, ERR_USAGE,
                "%s: notebook is %lld bytes, over the %zu-byte cap; raise "
                "--max-notebook-size if you trust it",
                path, (long long)st.st_size, max_bytes);
        goto out;
    }
    if (fcntl(fd, F_SETFL, 0) < 0) {
        err_errno(err, ERR_USAGE, "%s: cannot read notebook", path);
        goto out;
    }
    /* Read to EOF rather than trusting st_size (the file may grow), but
     * never past the cap. */
    size_t alloc = (size_t)st.st_size + 1;
    data = xmalloc(alloc);
    for (;;) {
        if (got == alloc) {
            if (got > max_bytes) {
                err_set(err, ERR_USAGE,
                        "%s: notebook grew past the %zu-byte cap while "
                        "being read; raise --max-notebook-size if you "
                        "trust it",
                        path, max_bytes);
                goto out;
            }
            alloc = alloc * 2 > max_bytes + 1 ? max_bytes + 1 : alloc * 2;
            if (alloc <= got)
                alloc = got + 1;
            data = xrealloc(data, alloc);
        }
        ssize_t n = read(fd, data + got, alloc - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_errno(err, ERR_USAGE, "%s: cannot read notebook", path);
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got > max_bytes) {
        err_set(err, ERR_USAGE,
                "%s: notebook grew past the %zu-byte cap while being read; "
                "raise --max-notebook-size if you trust it",
                path, max_bytes);
        goto out;
    }
    nb = s_read_mem(data, got, path, max_cells, err);
out:
    if (fd >= 0)
        close(fd);
    free(data);
    return nb;
}

/* ---- writing ---------------------------------------------------------- */

/* Roles for nb_json_dump, mirroring nbformat's split_lines and
 * strip_transient at write time. */
enum {
    R_NOTEBOOK = 1,
    R_NB_METADATA,
    R_CELLS,
    R_CELL,
    R_CELL_METADATA,
    R_ATTACHMENTS,
    R_BUNDLE,
    R_OUTPUTS,
    R_OUTPUT
};

/* nbformat's _split_mimebundle: which mime values are split into lines. */
static int
s_split_mime(const char *mime)
{
    return strncmp(mime, "text/", 5) == 0 ||
           strcmp(mime, "application/javascript") == 0 ||
           strcmp(mime, "image/svg+xml") == 0;
}

static int
s_role(int role, const json_t *parent, const char *key, const json_t *child)
{
    const char *t;
    switch (role) {
    case R_NOTEBOOK:
        if (!strcmp(key, "cells") && json_is_array(child))
            return R_CELLS;
        if (!strcmp(key, "metadata") && json_is_object(child))
            return R_NB_METADATA;
        return NB_JSON_PLAIN;
    case R_NB_METADATA:
        if (!strcmp(key, "orig_nbformat") ||
            !strcmp(key, "orig_nbformat_minor") || !strcmp(key, "signature"))
            return NB_JSON_SKIP;
        return NB_JSON_PLAIN;
    case R_CELLS:
        return json_is_object(child) ? R_CELL : NB_JSON_PLAIN;
    case R_CELL:
        if (!strcmp(key, "source"))
            return NB_JSON_LINES;
        if (!strcmp(key, "metadata") && json_is_object(child))
            return R_CELL_METADATA;
        if (!strcmp(key, "attachments") && json_is_object(child))
            return R_ATTACHMENTS;
        t = nb_cell_type(parent);
        if (!strcmp(key, "outputs") && t && !strcmp(t, "code"))
            return R_OUTPUTS;
        return NB_JSON_PLAIN;
    case R_CELL_METADATA:
        return strcmp(key, "trusted") ? NB_JSON_PLAIN : NB_JSON_SKIP;
    case R_ATTACHMENTS:
        return json_is_object(child) ? R_BUNDLE : NB_JSON_PLAIN;
    case R_BUNDLE:
        return s_split_mime(key) ? NB_JSON_LINES : NB_JSON_PLAIN;
    case R_OUTPUTS:
        return json_is_object(child) ? R_OUTPUT : NB_JSON_PLAIN;
    case R_OUTPUT:
        t = json_string_value(json_object_get(parent, "output_type"));
        if (!t)
            return NB_JSON_PLAIN;
        if ((!strcmp(t, "execute_result") || !strcmp(t, "display_data")) &&
            !strcmp(key, "data") && json_is_object(child))
            return R_BUNDLE;
        if (!strcmp(t, "stream") && !strcmp(key, "text"))
            return NB_JSON_LINES;
        return NB_JSON_PLAIN;
    }
    return NB_JSON_PLAIN;
}

char *
nb_notebook_write_mem(const nb_notebook_t *nb, size_t *len)
{
    buf_t b;
    buf_init(&b, 0);
    nb_json_dump(&b, nb->root, 0, R_NOTEBOOK, s_role);
    buf_append(&b, "\n", 1);
    return buf_detach(&b, len);
}

/* The mode a new file gets: 0666 minus the umask, read without changing it
 * (umask(2) would race with other threads). */
static mode_t
s_new_file_mode(void)
{
    mode_t mode = 0644;
    char line[128];
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return mode;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Umask:", 6) == 0) {
            mode = 0666 & ~(mode_t)strtoul(line + 6, NULL, 8);
            break;
        }
    fclose(f);
    return mode;
}

int
nb_notebook_write_file(const nb_notebook_t *nb, const char *path, err_t *err)
{
    struct stat st;
    /* Keep an existing regular file's permission bits, never its set-id
     * or sticky bits, and never a link's target's (the rename replaces
     * the link, not the target); anything else is a new file: 0666 less
     * the umask. */
    mode_t mode = lstat(path, &st) == 0 && S_ISREG(st.st_mode)
                      ? (st.st_mode & 0777)
                      : s_new_file_mode();
    size_t len;
    char *text = nb_notebook_write_mem(nb, &len);
    int rc = file_write_atomic(path, text, len, mode, err);
    free(text);
    return rc;
}

char *
nb_path_sibling(const char *path, const char *suffix)
{
    size_t n = strlen(path);
    if (n > 6 && strcmp(path + n - 6, ".ipynb") == 0)
        n -= 6;
    return xasprintf("%.*s%s", (int)n, path, suffix);
}
