/* Unit tests for kernel-bridge/kb_kernelspec: finding kernels like
 * jupyter_client does. */
#include "../tap.h"

#include "common/strv.h"
#include "kernel-bridge/kb_kernelspec.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_root[] = "/tmp/kb_kernelspec_test.XXXXXX";

/* Write <s_root>/<rel>/kernel.json (creating directories). */
static void
s_kernel(const char *rel, const char *json)
{
    char cmd[1024], path[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s'", s_root, rel);
    if (system(cmd) != 0)
        diag("mkdir failed: %s", cmd);
    snprintf(path, sizeof path, "%s/%s/kernel.json", s_root, rel);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
}

static int
s_has(const char *text, const char *needle)
{
    if (strstr(text, needle))
        return 1;
    diag("  '%s' does not contain '%s'", text, needle);
    return 0;
}

static int
s_ends(const char *s, const char *suffix)
{
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return s && a >= b && !strcmp(s + a - b, suffix);
}

/* kb_kernelspec_resolve_program on a spec whose argv is {prog, "-f"}:
 * the resolved program in *out (new string) on success. */
static int
s_resolve(const char *prog, json_t *env, char **out, err_t *err)
{
    kb_kernelspec_t ks = {0};
    ks.name = strdup("k");
    ks.resource_dir = strdup("/r");
    ks.argv = calloc(3, sizeof *ks.argv);
    ks.argv[0] = strdup(prog);
    ks.argv[1] = strdup("-f");
    ks.env = json_incref(env);
    int rc = kb_kernelspec_resolve_program(&ks, err);
    *out = rc ? NULL : strdup(ks.argv[0]);
    kb_kernelspec_release(&ks);
    return rc;
}

int
main(void)
{
    kb_kernelspec_t ks;
    err_t err;
    char env[1024];

    err_clear(&err);
    if (!mkdtemp(s_root)) {
        perror("mkdtemp");
        return 1;
    }
    /* JUPYTER_PATH has two entries; HOME holds the user dir. */
    snprintf(env, sizeof env, "%s/jp1::%s/jp2", s_root, s_root);
    setenv("JUPYTER_PATH", env, 1);
    snprintf(env, sizeof env, "%s/home", s_root);
    setenv("HOME", env, 1);
    unsetenv("JUPYTER_DATA_DIR");
    unsetenv("XDG_DATA_HOME");

    s_kernel("jp1/kernels/first",
             "{\"argv\": [\"/bin/first\", \"-f\", \"{connection_file}\"], "
             "\"display_name\": \"First\", \"language\": \"python\"}");
    s_kernel("jp2/kernels/first", "{\"argv\": [\"/bin/shadowed\"]}");
    s_kernel("jp2/kernels/MixedCase",
             "{\"argv\": [\"x\", \"--res={resource_dir}/a\", "
             "\"{connection_file}:{connection_file}\", \"{prefix}\"], "
             "\"interrupt_mode\": \"message\", "
             "\"env\": {\"FOO\": \"bar\", \"N\": \"1\"}, "
             "\"metadata\": {\"debugger\": true}}");
    s_kernel("home/.local/share/jupyter/kernels/userk",
             "{\"argv\": [\"/bin/user\"], \"display_name\": \"User\"}");
    s_kernel("home/.local/share/jupyter/kernels/python3",
             "{\"argv\": [\"/bin/userpy\"]}");
    s_kernel("jp1/kernels/noargv", "{\"display_name\": \"No argv\"}");
    s_kernel("jp1/kernels/badjson", "{\"argv\": [\"x\",]}");
    s_kernel("jp1/kernels/badenv", "{\"argv\": [\"x\"], \"env\": {\"A\": 1}}");
    s_kernel("jp1/kernels/badmode",
             "{\"argv\": [\"x\"], \"interrupt_mode\": \"telepathy\"}");
    snprintf(env, sizeof env, "mkdir -p %s/jp1/kernels/empty", s_root);
    if (system(env) != 0)
        diag("mkdir failed");

    /* --- precedence ---------------------------------------------------- */
    ok(kb_kernelspec_find("first", &ks, &err) == 0, "a kernel is found: %s",
       err.text);
    is_str(ks.argv ? ks.argv[0] : NULL, "/bin/first",
           "the first JUPYTER_PATH entry wins over a later one");
    is_str(ks.display_name, "First", "display_name is read");
    is_str(ks.language, "python", "language is read");
    is_str(ks.interrupt_mode, "signal", "interrupt_mode defaults to signal");
    ok(ks.env == NULL && ks.metadata == NULL,
       "absent env and metadata stay NULL");
    ok(s_ends(ks.resource_dir, "/jp1/kernels/first"),
       "resource_dir is the directory that holds kernel.json");
    kb_kernelspec_release(&ks);
    ok(ks.name == NULL && ks.argv == NULL, "release zeroes the struct");

    ok(kb_kernelspec_find("python3", &ks, &err) == 0 &&
           !strcmp(ks.argv[0], "/bin/userpy"),
       "the user data dir wins over /usr/share/jupyter/kernels");
    kb_kernelspec_release(&ks);
    ok(kb_kernelspec_find("userk", &ks, &err) == 0 &&
           !strcmp(ks.display_name, "User"),
       "kernels in ~/.local/share/jupyter/kernels are found");
    kb_kernelspec_release(&ks);

    /* --- case-insensitivity, env, interrupt_mode, argv expansion ------ */
    ok(kb_kernelspec_find("MIXEDcase", &ks, &err) == 0,
       "kernel names are case-insensitive: %s", err.text);
    is_str(ks.name, "mixedcase", "the kernel name is reported lowercased");
    is_str(ks.interrupt_mode, "message", "interrupt_mode message is read");
    is_str(json_string_value(json_object_get(ks.env, "FOO")), "bar",
           "env is read as an object of strings");
    ok(json_is_true(json_object_get(ks.metadata, "debugger")),
       "metadata is kept");
    char **argv = kb_kernelspec_expand_argv(&ks, "/run/k.json");
    char want[1024];
    snprintf(want, sizeof want, "--res=%s/jp2/kernels/MixedCase/a", s_root);
    is_str(argv[1], want, "{resource_dir} is replaced inside an argument");
    is_str(argv[2], "/run/k.json:/run/k.json",
           "every {connection_file} in an argument is replaced");
    is_str(argv[3], "{prefix}", "unknown placeholders are kept as written");
    ok(argv[4] == NULL, "the expanded argv is NULL-terminated");
    strv_free(argv);
    kb_kernelspec_release(&ks);

    /* --- malformed kernelspecs ---------------------------------------- */
    is_int(kb_kernelspec_find("noargv", &ks, &err), -1,
           "a kernelspec without argv is rejected");
    ok(s_has(err.text, "noargv/kernel.json") && s_has(err.text, "\"argv\""),
       "the missing-argv error names the file and the field");
    is_int(err.code, ERR_KERNEL, "a bad kernelspec is a kernel error");
    is_int(kb_kernelspec_find("badjson", &ks, &err), -1,
           "a kernel.json with bad JSON is rejected");
    ok(s_has(err.text, "badjson/kernel.json") && s_has(err.text, "line 1"),
       "the bad-JSON error names the file and the line");
    is_int(kb_kernelspec_find("badenv", &ks, &err), -1,
           "an env value that is not a string is rejected");
    ok(s_has(err.text, "env \"A\""), "the bad env entry is named");
    is_int(kb_kernelspec_find("badmode", &ks, &err), -1,
           "an unknown interrupt_mode is rejected");
    ok(s_has(err.text, "telepathy"), "the bad interrupt_mode is quoted");
    kb_kernelspec_release(&ks); /* safe after a failed find */

    /* --- unknown names and listing ------------------------------------ */
    is_int(kb_kernelspec_find("R", &ks, &err), -1, "an unknown kernel fails");
    is_int(err.code, ERR_KERNEL,
           "an unknown kernel is a kernel failure (exit 3, as documented)");
    ok(s_has(err.text, "pick one with --kernel, e.g. --kernel python3"),
       "the unknown-kernel error says how to pick one (--kernel python3)");
    ok(s_has(err.text, "no kernel named 'R'; available: ") &&
           s_has(err.text, "first, ") && s_has(err.text, "mixedcase") &&
           s_has(err.text, "userk") &&
           s_has(err.text, "(see 'jupyter kernelspec list')"),
       "the unknown-kernel error lists the kernels that exist");
    ok(!strstr(err.text, "empty"),
       "a directory without kernel.json is not listed as a kernel");

    json_t *list = kb_kernelspec_list();
    ok(json_object_get(list, "mixedcase") != NULL,
       "the list is keyed by lowercased name");
    ok(json_object_get(list, "empty") == NULL,
       "the list skips directories without kernel.json");
    ok(s_ends(json_string_value(json_object_get(list, "first")),
              "/jp1/kernels/first"),
       "the list maps a name to its first match");
    json_decref(list);

    json_t *dirs = kb_kernelspec_dirs();
    is_int(json_array_size(dirs), 5,
           "search dirs: 2 JUPYTER_PATH entries (empty one skipped), user, "
           "/usr/local, /usr");
    ok(s_ends(json_string_value(json_array_get(dirs, 2)),
              "/home/.local/share/jupyter/kernels"),
       "the user dir defaults to ~/.local/share/jupyter/kernels");
    json_decref(dirs);
    setenv("XDG_DATA_HOME", "/xdg", 1);
    dirs = kb_kernelspec_dirs();
    is_str(json_string_value(json_array_get(dirs, 2)), "/xdg/jupyter/kernels",
           "XDG_DATA_HOME moves the user dir");
    json_decref(dirs);
    setenv("JUPYTER_DATA_DIR", "/jdd", 1);
    dirs = kb_kernelspec_dirs();
    is_str(json_string_value(json_array_get(dirs, 2)), "/jdd/kernels",
           "JUPYTER_DATA_DIR wins over XDG_DATA_HOME");
    json_decref(dirs);

    /* --- the real system kernel --------------------------------------- */
    unsetenv("JUPYTER_PATH");
    unsetenv("JUPYTER_DATA_DIR");
    unsetenv("XDG_DATA_HOME");
    setenv("HOME", "/nonexistent", 1);
    if (access("/usr/share/jupyter/kernels/python3/kernel.json", R_OK) == 0) {
        ok(kb_kernelspec_find("python3", &ks, &err) == 0 &&
               !strcmp(ks.resource_dir, "/usr/share/jupyter/kernels/python3"),
           "the system python3 kernel is found: %s", err.text);
        argv = ks.argv ? kb_kernelspec_expand_argv(&ks, "/tmp/c.json") : NULL;
        int has = 0;
        for (char **p = argv; p && *p; p++)
            if (!strcmp(*p, "/tmp/c.json"))
                has = 1;
        ok(has, "the system python3 argv takes the connection file");
        strv_free(argv);
        kb_kernelspec_release(&ks);
    } else {
        skip("no /usr/share/jupyter/kernels/python3 here");
        skip("no /usr/share/jupyter/kernels/python3 here");
    }

    /* --- argv[0] as jupyter_client's launcher finds it ----------------- */
    snprintf(env, sizeof env, "%s/home", s_root);
    setenv("HOME", env, 1);
    char *got = NULL;
    setenv("JUPYTER_AGENT_PYTHON", "/opt/venv/bin/python", 1);
    ok(s_resolve("python", NULL, &got, &err) == 0 &&
           !strcmp(got, "/opt/venv/bin/python"),
       "'python' is the Jupyter stack's interpreter (JUPYTER_AGENT_PYTHON)");
    free(got);
    unsetenv("JUPYTER_AGENT_PYTHON");
    ok(s_resolve("python3", NULL, &got, &err) == 0 &&
           !strcmp(got, "/usr/bin/python3"),
       "'python3' defaults to /usr/bin/python3, not the first on PATH");
    free(got);
    snprintf(want, sizeof want, "%s/home/bin/k", s_root);
    ok(s_resolve("~/bin/k", NULL, &got, &err) == 0 && !strcmp(got, want),
       "'~/' is the user's home, as jupyter_client's expanduser");
    free(got);
    setenv("PATH", "/nonexistent:/bin:/usr/bin", 1);
    ok(s_resolve("sh", NULL, &got, &err) == 0 && !strcmp(got, "/bin/sh"),
       "a bare name is the first executable on PATH");
    free(got);
    json_t *spec_env = json_pack("{s:s}", "PATH", "/nonexistent");
    ok(s_resolve("sh", spec_env, &got, &err) == -1 && err.code == ERR_KERNEL &&
           s_has(err.text, "'sh'") &&
           s_has(err.text, "not on PATH (/nonexistent)") &&
           s_has(err.text, "/r/kernel.json"),
       "the kernelspec's own env PATH is searched, and a miss names it");
    json_decref(spec_env);

    /* --- what a kernel's runtime needs besides its program ------------- */
    {
        char res[1024], script[1024];
        snprintf(res, sizeof res, "%s/jp1", s_root);
        snprintf(script, sizeof script, "%s/jp1/kernels", s_root);
        char a0[] = "/usr/bin/R", a1[] = "-f", a3[] = "{connection_file}",
             a4[] = "/nonexistent/x", lang[] = "R";
        char *rargv[] = {a0, a1, script, a3, a4, NULL};
        kb_kernelspec_t rk = {.resource_dir = res, .language = lang};
        rk.argv = kb_kernelspec_expand_argv(&(kb_kernelspec_t){.argv = rargv},
                                            "/run/c.json");
        char **paths = kb_kernelspec_runtime_paths(&rk);
        int has_res = 0, has_script = 0, has_etc = 0, has_missing = 0;
        for (char **p = paths; *p; p++) {
            has_res |= !strcmp(*p, res);
            has_script |= !strcmp(*p, script);
            has_etc |= !strcmp(*p, "/etc/R");
            has_missing |= !strcmp(*p, "/nonexistent/x");
        }
        ok(has_res && has_script && !has_missing,
           "the resource dir and existing absolute argv paths are a "
           "kernel's runtime paths; missing ones are not");
        if (access("/etc/R", F_OK) == 0)
            ok(has_etc, "an R kernel's runtime includes /etc/R");
        else
            skip("no /etc/R on this host");
        strv_free(paths);
        strv_free(rk.argv);
    }

    snprintf(env, sizeof env, "rm -rf '%s'", s_root);
    if (system(env) != 0)
        diag("could not remove %s", s_root);
    return done_testing();
}
