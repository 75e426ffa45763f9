/* The agent kernel's history: kept across kernel restarts in a file
 * under the Jupyter data dir, and served to history_request. */
#include "agent/kernel/ag_kernel_impl.h"
#include "common/jget.h"
#include "common/jpaths.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The history file, like IPython's history.sqlite but under the Jupyter
 * data dir (common/jpaths): DATA_DIR/agent/history.jsonl. One JSON array
 * [session, line, input, output] per line. New string or NULL. */
static char *
s_history_file(void)
{
    char *data = jpaths_data_dir();
    char *path = data ? xasprintf("%s/agent/history.jsonl", data) : NULL;
    free(data);
    return path;
}

/* Load the last HISTORY_MAX entries of earlier kernels; this kernel's
 * session is one more than the last one found. Best effort. */
void
ag_kernel_history_load(ag_kernel_t *k)
{
    k->history_session = 1;
    k->history_path = s_history_file();
    FILE *f = k->history_path ? fopen(k->history_path, "r") : NULL;
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    size_t lines = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *e = json_loads(line, 0, NULL);
        lines++;
        if (json_is_array(e) && json_array_size(e) == 4 &&
            json_is_integer(json_array_get(e, 0)) &&
            json_is_integer(json_array_get(e, 1)) &&
            json_is_string(json_array_get(e, 2))) {
            json_int_t session = json_integer_value(json_array_get(e, 0));
            if (session >= k->history_session && session < 1 << 30)
                k->history_session = (int)session + 1;
            if (json_array_size(k->history) >= HISTORY_MAX)
                json_array_remove(k->history, 0);
            json_array_append(k->history, e);
        }
        json_decref(e);
    }
    free(line);
    fclose(f);
    if (lines <= 2 * HISTORY_MAX)
        return;
    /* Keep the file bounded: rewrite it with what was kept. */
    char *tmp = xasprintf("%s.tmp", k->history_path);
    FILE *w = fopen(tmp, "w");
    size_t i;
    json_t *e;
    json_array_foreach(k->history, i, e)
    {
        char *s = json_dumps(e, JSON_COMPACT);
        if (w && s)
            fprintf(w, "%s\n", s);
        free(s);
    }
    if (w && fclose(w) == 0)
        rename(tmp, k->history_path);
    free(tmp);
}

/* mkdir -p for the parent directories of `path` (mode 0700). */
static void
s_mkdirs_for(const char *path)
{
    char *dir = xstrdup(path);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(dir, 0700) != 0 && errno != EEXIST)
                break;
            *p = '/';
        }
    free(dir);
}

void
ag_kernel_history_add(ag_kernel_t *k, const char *code)
{
    if (json_array_size(k->history) >= HISTORY_MAX)
        json_array_remove(k->history, 0);
    json_t *e =
        json_pack("[i, i, s, O]", k->history_session, k->execution_count, code,
                  k->cell_result ? k->cell_result : json_null());
    json_array_append(k->history, e);
    char *s = k->history_path ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (!s)
        return;
    s_mkdirs_for(k->history_path);
    int fd =
        open(k->history_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps's NUL becomes the line end */
    if (fd < 0 || write(fd, s, n + 1) != (ssize_t)(n + 1))
        log_warn("history: cannot append to %s: %s", k->history_path,
                 strerror(errno));
    if (fd >= 0)
        close(fd);
    free(s);
}

static json_t *
s_history_entry(json_t *e, bool output)
{
    json_t *input = json_array_get(e, 2);
    json_t *third = output ? json_pack("[O, O]", input, json_array_get(e, 3))
                           : json_incref(input);
    return json_pack("[O, O, o]", json_array_get(e, 0), json_array_get(e, 1),
                     third);
}

int
ag_kernel_on_history(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                     void *arg)
{
    ag_kernel_t *k = arg;
    json_t *c = kb_msg_content(req);
    const char *type = jget_str(c, "hist_access_type", "tail");
    bool output = jget_bool(c, "output", false);
    json_t *nv = json_object_get(c, "n");
    size_t total = json_array_size(k->history);
    size_t n = json_is_integer(nv) && json_integer_value(nv) >= 0
                   ? (size_t)json_integer_value(nv)
                   : total;
    json_t *hist = json_array(), *e;
    size_t i;
    if (strcmp(type, "tail") == 0) {
        for (i = total > n ? total - n : 0; i < total; i++)
            json_array_append_new(
                hist, s_history_entry(json_array_get(k->history, i), output));
    } else if (strcmp(type, "range") == 0) {
        json_int_t start = json_integer_value(json_object_get(c, "start"));
        json_t *stopv = json_object_get(c, "stop");
        json_int_t stop = json_is_integer(stopv) ? json_integer_value(stopv)
                                                 : k->execution_count + 1;
        json_array_foreach(k->history, i, e)
        {
            /* A range is of this kernel's session, as in IPython. */
            json_int_t line = json_integer_value(json_array_get(e, 1));
            if (json_integer_value(json_array_get(e, 0)) ==
                    k->history_session &&
                line >= start && line < stop)
                json_array_append_new(hist, s_history_entry(e, output));
        }
    } else if (strcmp(type, "search") == 0) {
        const char *pattern = jget_str(c, "pattern", "*");
        bool unique = jget_bool(c, "unique", false);
        /* Newest first, so `unique` keeps the latest and `n` the last n. */
        for (i = total; i-- > 0 && json_array_size(hist) < n;) {
            e = json_array_get(k->history, i);
            const char *src = json_string_value(json_array_get(e, 2));
            if (fnmatch(pattern, src, 0) != 0)
                continue;
            bool dup = false;
            for (size_t j = 0; unique && j < json_array_size(hist) && !dup;
                 j++) {
                json_t *h = json_array_get(json_array_get(hist, j), 2);
                dup = json_equal(output ? json_array_get(h, 0) : h,
                                 json_array_get(e, 2));
            }
            if (!dup)
                json_array_insert_new(hist, 0, s_history_entry(e, output));
        }
    }
    return kb_server_reply(
        s, ch, req, "history_reply",
        json_pack("{s:s, s:o}", "status", "ok", "history", hist), NULL);
}
