/*
 * kb_kernelspec: kernelspec discovery like jupyter_client's
 * KernelSpecManager. See kb_kernelspec.h for the search order.
 */
#include "kernel-bridge/kb_kernelspec.h"

#include "common/buf.h"
#include "common/escape.h"
#include "common/jpaths.h"
#include "common/strv.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* kernel.json is small; anything this big is not a kernelspec. */
#define KB_KERNELSPEC_MAX_FILE (1024 * 1024)

json_t *
kb_kernelspec_dirs(void)
{
    json_t *dirs = json_array();
    const char *jp = getenv("JUPYTER_PATH");
    if (jp && *jp) {
        char *copy = xstrdup(jp), *save = NULL;
        for (char *t = strtok_r(copy, ":", &save); t;
             t = strtok_r(NULL, ":", &save)) {
            char *d = xasprintf("%s/kernels", t);
            json_array_append_new(dirs, json_string(d));
            free(d);
        }
        free(copy);
    }
    char *data = jpaths_data_dir();
    char *user = data ? xasprintf("%s/kernels", data) : NULL;
    free(data);
    if (user) {
        json_array_append_new(dirs, json_string(user));
        free(user);
    }
    json_array_append_new(dirs,
                          json_string("/usr/local/share/jupyter/kernels"));
    json_array_append_new(dirs, json_string("/usr/share/jupyter/kernels"));
    return dirs;
}

static int
s_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Is `dir`/`entry` a kernel directory (a directory with kernel.json)? */
static char *
s_kernel_dir(const char *dir, const char *entry)
{
    struct stat st;
    char *path = xasprintf("%s/%s", dir, entry);
    char *json = xasprintf("%s/kernel.json", path);
    int okay = stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
               stat(json, &st) == 0 && S_ISREG(st.st_mode);
    free(json);
    if (!okay) {
        free(path);
        return NULL;
    }
    return path;
}

/* Add the kernels of one directory to `found` (lowercased name -> dir),
 * keeping earlier entries. Entries are visited in sorted order so that two
 * names differing only in case resolve the same way every time. */
static void
s_scan(const char *dir, json_t *found)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    if (!d)
        return;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        names = xrealloc(names, (n + 1) * sizeof *names);
        names[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, s_cmp);
    for (size_t i = 0; i < n; i++) {
        char *key = xstrdup(names[i]);
        for (char *p = key; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        if (!json_object_get(found, key)) {
            char *path = s_kernel_dir(dir, names[i]);
            if (path)
                json_object_set_new(found, key, json_string(path));
            free(path);
        }
        free(key);
        free(names[i]);
    }
    free(names);
}

json_t *
kb_kernelspec_list(void)
{
    json_t *found = json_object();
    json_t *dirs = kb_kernelspec_dirs();
    size_t i;
    json_t *d;
    json_array_foreach(dirs, i, d) s_scan(json_string_value(d), found);
    json_decref(dirs);
    return found;
}

void
kb_kernelspec_release(kb_kernelspec_t *ks)
{
    if (!ks)
        return;
    free(ks->name);
    free(ks->resource_dir);
    strv_free(ks->argv);
    free(ks->display_name);
    free(ks->language);
    free(ks->interrupt_mode);
    json_decref(ks->env);
    json_decref(ks->metadata);
    memset(ks, 0, sizeof *ks);
}

/* Optional string field; -1 (with err) when present but not a string. */
static int
s_opt_string(json_t *root, const char *field, char **out, const char *def,
             const char *path, err_t *err)
{
    json_t *v = json_object_get(root, field);
    if (v && !json_is_string(v))
        return err_set(err, ERR_KERNEL, "%s: \"%s\" is not a string", path,
                       field);
    *out = xstrdup(v ? json_string_value(v) : def);
    return 0;
}

int
kb_kernelspec_load(const char *name, const char *dir, kb_kernelspec_t *out,
                   err_t *err)
{
    json_error_t jerr;
    json_t *root = NULL, *v;
    char *path = xasprintf("%s/kernel.json", dir);
    int rc = -1;
    size_t i;

    memset(out, 0, sizeof *out);
    root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        err_set(err, ERR_KERNEL,
                "%s: bad kernel.json at line %d, column %d: %s", path,
                jerr.line, jerr.column, jerr.text);
        goto out;
    }
    if (!json_is_object(root)) {
        err_set(err, ERR_KERNEL, "%s: expected a JSON object", path);
        goto out;
    }
    v = json_object_get(root, "argv");
    if (!json_is_array(v) || json_array_size(v) == 0) {
        err_set(err, ERR_KERNEL,
                "%s: \"argv\" must be a non-empty list of strings (the "
                "command that starts the kernel)",
                path);
        goto out;
    }
    json_t *x;
    json_array_foreach(v, i, x)
    {
        if (!json_is_string(x) ||
            strlen(json_string_value(x)) != json_string_length(x)) {
            err_set(err, ERR_KERNEL, "%s: argv[%zu] is not a string", path, i);
            goto out;
        }
    }
    out->argv = xcalloc(json_array_size(v) + 1, sizeof *out->argv);
    json_array_foreach(v, i, x) out->argv[i] = xstrdup(json_string_value(x));
    if (s_opt_string(root, "display_name", &out->display_name, "", path, err) ||
        s_opt_string(root, "language", &out->language, "", path, err) ||
        s_opt_string(root, "interrupt_mode", &out->interrupt_mode, "signal",
                     path, err))
        goto out;
    /* traitlets' CaselessStrEnum: any case, stored lowercased. */
    for (char *p = out->interrupt_mode; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (strcmp(out->interrupt_mode, "signal") &&
        strcmp(out->interrupt_mode, "message")) {
        err_set(err, ERR_KERNEL,
                "%s: \"interrupt_mode\" is '%.64s' (expected \"signal\" or "
                "\"message\")",
                path, out->interrupt_mode);
        goto out;
    }
    v = json_object_get(root, "env");
    if (v && !json_is_null(v)) {
        const char *key;
        if (!json_is_object(v)) {
            err_set(err, ERR_KERNEL, "%s: \"env\" is not an object", path);
            goto out;
        }
        json_object_foreach(v, key, x)
        {
            if (!json_is_string(x)) {
                err_set(err, ERR_KERNEL, "%s: env \"%.64s\" is not a string",
                        path, key);
                goto out;
            }
        }
        out->env = json_incref(v);
    }
    v = json_object_get(root, "metadata");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) {
            err_set(err, ERR_KERNEL, "%s: \"metadata\" is not an object", path);
            goto out;
        }
        out->metadata = json_incref(v);
    }
    out->name = xstrdup(name);
    for (char *p = out->name; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    out->resource_dir = xstrdup(dir);
    rc = 0;
out:
    json_decref(root);
    free(path);
    if (rc)
        kb_kernelspec_release(out);
    return rc;
}

int
kb_kernelspec_find(const char *name, kb_kernelspec_t *out, err_t *err)
{
    json_t *found = kb_kernelspec_list();
    json_t *dir = NULL;
    const char *key;
    json_t *v;
    int rc = -1;

    memset(out, 0, sizeof *out);
    if (!name || !*name) {
        err_set(err, ERR_USAGE, "no kernel name given");
        goto out;
    }
    json_object_foreach(found, key, v)
    {
        if (!strcasecmp(key, name)) {
            dir = v;
            break;
        }
    }
    if (!dir) {
        buf_t names;
        buf_init(&names, 0);
        /* Sorted, so the message is stable. */
        json_t *keys = json_array();
        json_object_foreach(found, key, v)
            json_array_append_new(keys, json_string(key));
        size_t n = json_array_size(keys);
        const char **sorted = xcalloc(n ? n : 1, sizeof *sorted);
        for (size_t i = 0; i < n; i++)
            sorted[i] = json_string_value(json_array_get(keys, i));
        if (n)
            qsort(sorted, n, sizeof *sorted, s_cmp);
        for (size_t i = 0; i < n && names.len < 600; i++) {
            buf_puts(&names, i ? ", " : "");
            esc_append(&names, sorted[i], strlen(sorted[i]), ESC_NAME);
        }
        buf_t first;
        buf_init(&first, 0);
        if (n)
            esc_append(&first, sorted[0], strlen(sorted[0]), ESC_NAME);
        free(sorted);
        json_decref(keys);
        /* The name may come from a notebook: escaped, never raw bytes. */
        buf_t shown;
        buf_init(&shown, 0);
        esc_append(&shown, name, strnlen(name, 128), ESC_NAME);
        /* A kernel that is not there is a kernel that cannot start (exit
         * 3, as documented): say which one to pick instead. */
        const char *pick = json_object_get(found, "python3") ? "python3"
                           : n                               ? buf_cstr(&first)
                                                             : NULL;
        err_set(err, ERR_KERNEL,
                "no kernel named '%s'; available: %s (see 'jupyter "
                "kernelspec list')%s%s",
                buf_cstr(&shown), n ? buf_cstr(&names) : "none",
                pick ? "; pick one with --kernel, e.g. --kernel " : "",
                pick ? pick : "");
        buf_release(&shown);
        buf_release(&names);
        buf_release(&first);
        goto out;
    }
    rc = kb_kernelspec_load(key, json_string_value(dir), out, err);
out:
    json_decref(found);
    return rc;
}

char **
kb_kernelspec_expand_argv(const kb_kernelspec_t *ks,
                          const char *connection_file)
{
    size_t n = 0;
    while (ks->argv && ks->argv[n])
        n++;
    char **argv = xcalloc(n + 1, sizeof *argv);
    for (size_t i = 0; i < n; i++) {
        /* One pass per placeholder would re-expand text that came from the
         * first substitution; a path containing "{resource_dir}" must stay
         * as written, so split on both in a single scan. */
        buf_t b;
        const char *s = ks->argv[i];
        buf_init(&b, 0);
        while (*s) {
            if (!strncmp(s, "{connection_file}", 17)) {
                buf_puts(&b, connection_file ? connection_file : "");
                s += 17;
            } else if (!strncmp(s, "{resource_dir}", 14)) {
                buf_puts(&b, ks->resource_dir ? ks->resource_dir : "");
                s += 14;
            } else {
                buf_append(&b, s, 1);
                s++;
            }
        }
        argv[i] = buf_detach(&b, NULL);
    }
    return argv;
}

/* The first executable regular file named `prog` in the colon-separated
 * `path` (empty entries mean the current directory, as in execvp), or
 * NULL. New string. */
static char *
s_which(const char *prog, const char *path)
{
    const char *p = path;
    for (;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *dir = len ? xstrndup(p, len) : xstrdup(".");
        char *cand = xasprintf("%s/%s", dir, prog);
        free(dir);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
            access(cand, X_OK) == 0) {
            if (cand[0] != '/') {
                char *abs = realpath(cand, NULL);
                free(cand);
                cand = abs;
            }
            return cand;
        }
        free(cand);
        if (!end)
            return NULL;
        p = end + 1;
    }
}

int
kb_kernelspec_resolve_program(kb_kernelspec_t *ks, err_t *err)
{
    const char *prog = ks->argv ? ks->argv[0] : NULL;
    if (!prog || !*prog)
        return err_set(err, ERR_KERNEL,
                       "kernel '%s': kernel.json has no program",
                       ks->name ? ks->name : "?");
    char *found = NULL;
    const char *home = getenv("HOME");
    if (prog[0] == '~' && prog[1] == '/' && home && *home) {
        found = xasprintf("%s%s", home, prog + 1);
    } else if (strchr(prog, '/')) {
        return 0; /* absolute, or relative to where we run: as written */
    } else if (!strcmp(prog, "python") || !strcmp(prog, "python3")) {
        const char *py = getenv("JUPYTER_AGENT_PYTHON");
        found = xstrdup(py && py[0] == '/' ? py : "/usr/bin/python3");
    } else {
        json_t *v = ks->env ? json_object_get(ks->env, "PATH") : NULL;
        const char *path =
            json_is_string(v) ? json_string_value(v) : getenv("PATH");
        if (!path)
            path = "/bin:/usr/bin"; /* os.defpath */
        found = s_which(prog, path);
        if (!found)
            return err_set(err, ERR_KERNEL,
                           "kernel '%s': its program '%s' (argv[0] in "
                           "%s/kernel.json) is not on PATH (%s); install it "
                           "or write its full path there",
                           ks->name ? ks->name : "?", prog,
                           ks->resource_dir ? ks->resource_dir : "?", path);
    }
    free(ks->argv[0]);
    ks->argv[0] = found;
    return 0;
}

/* Append a copy of `path` to the NULL-terminated *list if it exists and is
 * not listed yet. */
static void
s_push_path(char ***list, size_t *n, const char *path)
{
    struct stat st;
    if (!path || path[0] != '/' || stat(path, &st) != 0)
        return;
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*list)[i], path))
            return;
    *list = xrealloc(*list, (*n + 2) * sizeof **list);
    (*list)[(*n)++] = xstrdup(path);
    (*list)[*n] = NULL;
}

char **
kb_kernelspec_runtime_paths(const kb_kernelspec_t *ks)
{
    static const struct {
        const char *language;
        const char *paths[5];
    } profiles[] = {
        {"r", {"/etc/R", "/usr/lib/R", "/usr/local/lib/R", "/usr/share/R"}},
        {"julia", {"/etc/julia"}},
        {"javascript",
         {"/etc/nodejs", "/usr/lib/node_modules",
          "/usr/local/lib/node_modules"}},
        {"typescript",
         {"/etc/nodejs", "/usr/lib/node_modules",
          "/usr/local/lib/node_modules"}},
        {"bash",
         {"/etc/bash.bashrc", "/etc/inputrc", "/etc/profile",
          "/etc/profile.d"}},
    };
    char **list = xcalloc(1, sizeof *list);
    size_t n = 0;
    s_push_path(&list, &n, ks->resource_dir);
    for (size_t i = 1; ks->argv && ks->argv[0] && ks->argv[i]; i++)
        if (!strstr(ks->argv[i], "{connection_file}"))
            s_push_path(&list, &n, ks->argv[i]);
    const char *lang = ks->language ? ks->language : "";
    for (size_t p = 0; p < sizeof profiles / sizeof profiles[0]; p++) {
        if (strcasecmp(lang, profiles[p].language) != 0)
            continue;
        for (size_t i = 0; i < 5 && profiles[p].paths[i]; i++)
            s_push_path(&list, &n, profiles[p].paths[i]);
    }
    if (!strcasecmp(lang, "julia")) {
        const char *depot = getenv("JULIA_DEPOT_PATH");
        const char *home = getenv("HOME");
        if (depot && *depot) {
            char *copy = xstrdup(depot), *save = NULL;
            for (char *t = strtok_r(copy, ":", &save); t;
                 t = strtok_r(NULL, ":", &save))
                s_push_path(&list, &n, t);
            free(copy);
        } else if (home && *home) {
            char *d = xasprintf("%s/.julia", home);
            s_push_path(&list, &n, d);
            free(d);
        }
    }
    return list;
}
