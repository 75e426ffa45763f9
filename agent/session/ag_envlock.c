#include "agent/session/ag_envlock.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_output.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern const char ag_envlock_probe_py[]; /* ag_envlock_probe.py */
extern char **environ;

#define PROBE_OUTPUT_MAX ((size_t)8 << 20)
#define DPKG_OUTPUT_MAX ((size_t)16 << 20)

/* `j` (stolen) as base64 of its compact JSON: a probe's argument, which
 * needs no quoting in Python. New string. */
static char *
s_b64_json(json_t *arg)
{
    char *j = json_dumps(arg, JSON_COMPACT);
    json_decref(arg);
    size_t n = strlen(j);
    size_t cap = sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL);
    char *b = xmalloc(cap);
    sodium_bin2base64(b, cap, (unsigned char *)j, n,
                      sodium_base64_VARIANT_ORIGINAL);
    free(j);
    return b;
}

/* Run the probe file plus `call` (e.g. "_ja_envlock('...')") silently and
 * parse what it prints. New reference, or NULL with err set. */
static json_t *
s_probe(kb_kernel_t *k, const char *call, int timeout_ms, err_t *err)
{
    char *code = xasprintf("%s\nprint(%s)\ndel _ja_envlock, _ja_env_versions\n",
                           ag_envlock_probe_py, call);
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.store_history = false;
    kb_output_t *out = kb_output_new(NULL, PROBE_OUTPUT_MAX);
    json_t *lock = NULL;
    if (kb_kernel_execute(k, code, &xo, timeout_ms, out, NULL, err) == 0) {
        buf_t b;
        buf_init(&b, PROBE_OUTPUT_MAX);
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            const char *name = json_string_value(json_object_get(o, "name"));
            const char *t = json_string_value(json_object_get(o, "text"));
            if (name && t && strcmp(name, "stdout") == 0)
                buf_puts(&b, t);
            const char *type =
                json_string_value(json_object_get(o, "output_type"));
            if (type && strcmp(type, "error") == 0)
                err_set(err, ERR_KERNEL, "the environment probe raised %s: %s",
                        json_string_value(json_object_get(o, "ename")),
                        json_string_value(json_object_get(o, "evalue")));
        }
        lock = json_loads(buf_cstr(&b), 0, NULL);
        buf_release(&b);
        if (!json_is_object(lock)) {
            json_decref(lock);
            lock = NULL;
            if (!err->code)
                err_set(err, ERR_KERNEL,
                        "the environment probe printed no JSON");
        }
    }
    kb_output_destroy(&out);
    free(code);
    return lock;
}

/* Run argv, collect stdout (capped). Exit status in *status. New string,
 * or NULL when it could not start. */
static char *
s_run(const char *const argv[], int *status)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc =
        posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return NULL;
    }
    buf_t b;
    buf_init(&b, DPKG_OUTPUT_MAX);
    char chunk[8192];
    for (;;) {
        ssize_t n = read(fds[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        buf_append(&b, chunk, (size_t)n); /* past the cap: dropped */
    }
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    return buf_detach(&b, NULL);
}

/* The next line of a buffer we own (the newline becomes a NUL), or NULL
 * at its end. */
static char *
s_next_line(char **cursor)
{
    char *line = *cursor;
    if (!line || !*line)
        return NULL;
    char *nl = strchr(line, '\n');
    if (nl)
        *nl++ = '\0';
    *cursor = nl ? nl : line + strlen(line);
    return line;
}

/* "pkg:arch, other: /path" lines -> modules[*].debian_package, and the set
 * of packages as {pkg: null}. */
static void
s_dpkg_owners(json_t *modules, json_t *pkgs)
{
    json_t *by_file = json_object();
    size_t nargs = 0;
    const char **argv = xcalloc(json_object_size(modules) + 3, sizeof *argv);
    argv[nargs++] = "dpkg-query";
    argv[nargs++] = "-S";
    const char *name;
    json_t *m;
    json_object_foreach(modules, name, m)
    {
        const char *f = json_string_value(json_object_get(m, "file"));
        if (f && f[0] == '/' && !json_object_get(by_file, f)) {
            json_object_set(by_file, f, m);
            argv[nargs++] = f;
        }
    }
    int status = 0;
    char *out = nargs > 2 ? s_run(argv, &status) : NULL;
    char *cursor = out;
    for (char *line; (line = s_next_line(&cursor));) {
        char *sep = strstr(line, ": /");
        if (!sep || strncmp(line, "diversion by", 12) == 0)
            continue;
        *sep = '\0';
        json_t *mod = json_object_get(by_file, sep + 2);
        char *first = line;
        first[strcspn(first, ",")] = '\0'; /* the first owner */
        char *arch = strchr(first, ':');
        char *pkg = xstrdup(first);
        if (arch)
            pkg[arch - first] = '\0';
        if (mod)
            json_object_set_new(mod, "debian_package", json_string(pkg));
        json_object_set_new(pkgs, first, json_null());
        free(pkg);
    }
    free(out);
    free((void *)argv);
    json_decref(by_file);
}

/* Fill {pkg: version} for the packages named in `pkgs`. */
static void
s_dpkg_versions(json_t *pkgs)
{
    size_t n = 0;
    const char **argv = xcalloc(json_object_size(pkgs) + 4, sizeof *argv);
    argv[n++] = "dpkg-query";
    argv[n++] = "-W";
    argv[n++] = "-f=${Package}\\t${Version}\\n";
    const char *p;
    json_t *v;
    json_object_foreach(pkgs, p, v) argv[n++] = p;
    int status = 0;
    char *out = n > 3 ? s_run(argv, &status) : NULL;
    json_t *found = json_object();
    char *cursor = out;
    for (char *line; (line = s_next_line(&cursor));) {
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = '\0';
        json_object_set_new(found, line, json_string(tab + 1));
    }
    json_object_clear(pkgs);
    json_object_foreach(found, p, v)
    {
        char *bare = xstrdup(p);
        bare[strcspn(bare, ":")] = '\0';
        json_object_set(pkgs, bare, v);
        free(bare);
    }
    json_decref(found);
    free(out);
    free((void *)argv);
}

json_t *
ag_envlock_capture(kb_kernel_t *k, const nb_notebook_t *nb, int timeout_ms,
                   err_t *err)
{
    json_t *srcs = json_array();
    for (size_t i = 0; nb && i < nb_notebook_ncells(nb); i++) {
        json_t *c = nb_notebook_cell(nb, i);
        const char *t = nb_cell_type(c), *src = nb_cell_source(c);
        if (t && src && strcmp(t, "code") == 0)
            json_array_append_new(srcs, json_string(src));
    }
    char *b64 = s_b64_json(srcs);
    char *call = xasprintf("_ja_envlock('%s')", b64);
    json_t *lock = s_probe(k, call, timeout_ms, err);
    free(call);
    free(b64);
    if (!lock)
        return NULL;
    json_t *modules = json_object_get(lock, "modules");
    if (!json_is_object(modules)) {
        json_decref(lock);
        err_set(err, ERR_KERNEL, "the environment probe listed no modules");
        return NULL;
    }
    json_t *pkgs = json_object();
    int status = 0;
    const char *probe_argv[] = {"dpkg-query", "--version", NULL};
    char *ver = s_run(probe_argv, &status);
    if (ver && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        s_dpkg_owners(modules, pkgs);
        s_dpkg_versions(pkgs);
        json_object_set_new(lock, "debian_packages", pkgs);
    } else {
        json_decref(pkgs);
        json_object_set_new(lock, "debian_packages", json_null());
    }
    free(ver);
    return lock;
}

static const char *
s_version(const json_t *lock, const char *module)
{
    json_t *m = json_object_get(json_object_get(lock, "modules"), module);
    if (json_is_true(json_object_get(m, "missing")))
        return "(not installed)";
    const char *v = json_string_value(json_object_get(m, "version"));
    return v ? v : "(unknown)";
}

json_t *
ag_envlock_now(kb_kernel_t *k, const json_t *recorded, int timeout_ms,
               err_t *err)
{
    json_t *want = json_object();
    json_t *mods = json_object_get(recorded, "modules");
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(recorded, "notebook_imports"), i, m)
    {
        const char *name = json_string_value(m);
        if (!name)
            continue;
        json_t *dist =
            json_object_get(json_object_get(mods, name), "distribution");
        json_object_set(want, name, dist ? dist : json_null());
    }
    char *b64 = s_b64_json(want);
    char *call = xasprintf("_ja_env_versions('%s')", b64);
    json_t *now = s_probe(k, call, timeout_ms, err);
    free(call);
    free(b64);
    return now;
}

char *
ag_envlock_diff(const json_t *recorded, const json_t *now)
{
    buf_t b;
    buf_init(&b, 0);
    const char *pa = json_string_value(json_object_get(recorded, "python"));
    const char *pb = json_string_value(json_object_get(now, "python"));
    if (pa && pb && strcmp(pa, pb) != 0)
        buf_printf(&b, "python %s -> %s\n", pa, pb);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(recorded, "notebook_imports"), i, m)
    {
        const char *name = json_string_value(m);
        if (!name)
            continue;
        const char *va = s_version(recorded, name), *vb = s_version(now, name);
        if (strcmp(va, vb) != 0)
            buf_printf(&b, "%s %s -> %s\n", name, va, vb);
    }
    return buf_detach(&b, NULL);
}
