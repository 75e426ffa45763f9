/*
 * sb_policy: limits, flags, environment and JSON for a sandbox.
 */
#include "sandbox/sb_policy.h"

#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB ((uint64_t)1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)

void
sb_policy_init_default(sb_policy_t *p)
{
    memset(p, 0, sizeof *p);
    p->memory_bytes = 2 * GIB;
    p->swap_bytes = 0;
    p->pids = 128;
    p->cpus = 1.0;
    p->workspace_bytes = 512 * MIB;
    p->tmp_bytes = 256 * MIB;
    p->shm_bytes = 64 * MIB;
    p->nofile = 4096;
    p->fsize_bytes = 0;
    p->network = false;
    p->env_allow = xcalloc(1, sizeof(char *));
}

void
sb_policy_release(sb_policy_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_env_allow; i++)
        free(p->env_allow[i]);
    free(p->env_allow);
    for (size_t i = 0; i < p->n_binds; i++) {
        free(p->binds[i].host);
        free(p->binds[i].inside);
    }
    free(p->binds);
    free(p->keep_workspace_dir);
    memset(p, 0, sizeof *p);
}

void
sb_policy_copy(sb_policy_t *dst, const sb_policy_t *src)
{
    *dst = *src;
    dst->env_allow = xcalloc(src->n_env_allow + 1, sizeof(char *));
    for (size_t i = 0; i < src->n_env_allow; i++)
        dst->env_allow[i] = xstrdup(src->env_allow[i]);
    dst->binds = NULL;
    if (src->n_binds) {
        dst->binds = xcalloc(src->n_binds, sizeof *dst->binds);
        for (size_t i = 0; i < src->n_binds; i++) {
            dst->binds[i].host = xstrdup(src->binds[i].host);
            dst->binds[i].inside = xstrdup(src->binds[i].inside);
        }
    }
    dst->keep_workspace_dir =
        src->keep_workspace_dir ? xstrdup(src->keep_workspace_dir) : NULL;
}

void
sb_policy_out_opts(const sb_policy_t *p, sb_files_out_opts_t *o)
{
    sb_files_out_opts_init(o, p->workspace_bytes);
    o->force = p->out_force;
    o->keep_exec = p->out_keep_exec;
}

int
sb_policy_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || isinf(v) || isnan(v) ||
        !isdigit((unsigned char)s[0]))
        return -1;
    uint64_t mult = 1;
    const char *u = end;
    switch (toupper((unsigned char)*u)) {
    case '\0':
        break;
    case 'B':
        u++;
        break;
    case 'K':
        mult = KIB;
        u++;
        break;
    case 'M':
        mult = MIB;
        u++;
        break;
    case 'G':
        mult = GIB;
        u++;
        break;
    case 'T':
        mult = TIB;
        u++;
        break;
    default:
        return -1;
    }
    if (mult > 1) { /* accept K, KB, KiB (all binary) */
        if (*u == 'i' || *u == 'I')
            u++;
        if (*u == 'b' || *u == 'B')
            u++;
    }
    if (*u != '\0')
        return -1;
    double bytes = v * (double)mult;
    if (bytes >= 18446744073709551615.0 || bytes < 1.0)
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

const char *
sb_policy_format_bytes(uint64_t n, char *buf, size_t size)
{
    static const struct {
        uint64_t unit;
        const char *name;
    } units[] = {{TIB, "TiB"}, {GIB, "GiB"}, {MIB, "MiB"}, {KIB, "KiB"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (n < units[i].unit)
            continue;
        if (n % units[i].unit == 0)
            snprintf(buf, size, "%llu %s",
                     (unsigned long long)(n / units[i].unit), units[i].name);
        else
            snprintf(buf, size, "%.1f %s", (double)n / (double)units[i].unit,
                     units[i].name);
        return buf;
    }
    snprintf(buf, size, "%llu bytes", (unsigned long long)n);
    return buf;
}

static int
s_valid_env_name(const char *name)
{
    if (!name || !*name || isdigit((unsigned char)name[0]))
        return 0;
    for (const char *c = name; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_'))
            return 0;
    return 1;
}

int
sb_policy_allow_env(sb_policy_t *p, const char *name, err_t *err)
{
    if (!s_valid_env_name(name))
        return err_set(err, ERR_USAGE,
                       "--env: '%s' is not a variable name (letters, digits "
                       "and '_'; the value is taken from the environment)",
                       name ? name : "");
    p->env_allow =
        xrealloc(p->env_allow, (p->n_env_allow + 2) * sizeof(char *));
    p->env_allow[p->n_env_allow++] = xstrdup(name);
    p->env_allow[p->n_env_allow] = NULL;
    return 0;
}

/* Absolute, normalised, no "." or ".." components, no "//". */
static int
s_clean_abs_path(const char *path)
{
    if (!path || path[0] != '/' || strlen(path) >= 1024)
        return 0;
    const char *c = path;
    while (*c) {
        while (*c == '/')
            c++;
        const char *start = c;
        while (*c && *c != '/')
            c++;
        size_t n = (size_t)(c - start);
        if ((n == 1 && start[0] == '.') ||
            (n == 2 && start[0] == '.' && start[1] == '.'))
            return 0;
    }
    return strstr(path, "//") == NULL;
}

int
sb_policy_add_bind(sb_policy_t *p, const char *host, const char *inside,
                   err_t *err)
{
    if (!inside)
        inside = host;
    if (!s_clean_abs_path(host))
        return err_set(err, ERR_USAGE,
                       "--bind: host path '%s' must be absolute without '.' "
                       "or '..' components",
                       host ? host : "");
    if (!s_clean_abs_path(inside) || strcmp(inside, "/") == 0)
        return err_set(err, ERR_USAGE,
                       "--bind: inside path '%s' must be absolute, not '/', "
                       "without '.' or '..' components",
                       inside);
    static const char *const reserved[] = {"/proc", "/dev", "/mnt/data", "/tmp",
                                           SB_HOME_PATH};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        size_t n = strlen(reserved[i]);
        if (strncmp(inside, reserved[i], n) == 0 &&
            (inside[n] == '\0' || inside[n] == '/'))
            return err_set(err, ERR_USAGE,
                           "--bind: '%s' is inside %s, which the sandbox "
                           "manages; choose another place",
                           inside, reserved[i]);
    }
    p->binds = xrealloc(p->binds, (p->n_binds + 1) * sizeof *p->binds);
    p->binds[p->n_binds].host = xstrdup(host);
    p->binds[p->n_binds].inside = xstrdup(inside);
    p->n_binds++;
    return 0;
}

static int
s_size_flag(const char *flag, const char *value, uint64_t *out, err_t *err)
{
    if (sb_policy_parse_size(value, out) < 0)
        return err_set(err, ERR_USAGE,
                       "%s: '%s' is not a size; use e.g. 512M or 2G", flag,
                       value);
    return 0;
}

int
sb_policy_parse_flag(sb_policy_t *p, const char *flag, const char *value,
                     err_t *err)
{
    static const char *const names[] = {
        "--memory", "--cpus",     "--pids",           "--disk",
        "--tmp",    "--shm",      "--nofile",         "--fsize",
        "--env",    "--bind",     "--keep-workspace", "--network",
        "--force",  "--keep-exec"};
    char name[32];
    const char *eq = strchr(flag, '=');
    size_t nlen = eq ? (size_t)(eq - flag) : strlen(flag);
    if (nlen >= sizeof name)
        return 0;
    memcpy(name, flag, nlen);
    name[nlen] = '\0';
    int known = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            known = 1;
    if (!known)
        return 0;
    if (strcmp(name, "--force") == 0 || strcmp(name, "--keep-exec") == 0) {
        if (eq)
            return err_set(err, ERR_USAGE, "%s takes no value", name);
        if (name[2] == 'f')
            p->out_force = true;
        else
            p->out_keep_exec = true;
        return 1;
    }
    if (strcmp(name, "--network") == 0)
        return err_set(err, ERR_USAGE,
                       "--network: sandboxes have no network (loopback only); "
                       "bring data in with --file instead");
    int used = eq ? 1 : 2;
    if (eq)
        value = eq + 1;
    if (!value)
        return err_set(err, ERR_USAGE, "%s needs a value", name);

    uint64_t n = 0;
    if (strcmp(name, "--memory") == 0) {
        if (s_size_flag(name, value, &n, err) < 0)
            return -1;
        if (n < 16 * MIB)
            return err_set(err, ERR_USAGE,
                           "--memory: %s is too small; use at least 16M",
                           value);
        p->memory_bytes = n;
    } else if (strcmp(name, "--disk") == 0) {
        if (s_size_flag(name, value, &p->workspace_bytes, err) < 0)
            return -1;
    } else if (strcmp(name, "--tmp") == 0) {
        if (s_size_flag(name, value, &p->tmp_bytes, err) < 0)
            return -1;
    } else if (strcmp(name, "--shm") == 0) {
        if (s_size_flag(name, value, &p->shm_bytes, err) < 0)
            return -1;
    } else if (strcmp(name, "--fsize") == 0) {
        if (s_size_flag(name, value, &p->fsize_bytes, err) < 0)
            return -1;
    } else if (strcmp(name, "--cpus") == 0) {
        char *end = NULL;
        errno = 0;
        double c = strtod(value, &end);
        if (errno || end == value || *end || !(c >= 0.01) || c > 1024)
            return err_set(err, ERR_USAGE,
                           "--cpus: '%s' is not a CPU count between 0.01 and "
                           "1024 (e.g. 1.5)",
                           value);
        p->cpus = c;
    } else if (strcmp(name, "--pids") == 0 || strcmp(name, "--nofile") == 0) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        unsigned long long lo = strcmp(name, "--pids") == 0 ? 4 : 16;
        if (errno || end == value || *end || value[0] == '-' || v < lo ||
            v > (1ULL << 22))
            return err_set(err, ERR_USAGE,
                           "%s: '%s' is not a whole number between %llu and "
                           "4194304",
                           name, value, lo);
        if (strcmp(name, "--pids") == 0)
            p->pids = (unsigned)v;
        else
            p->nofile = v;
    } else if (strcmp(name, "--env") == 0) {
        if (sb_policy_allow_env(p, value, err) < 0)
            return -1;
    } else if (strcmp(name, "--bind") == 0) {
        char *copy = xstrdup(value);
        char *colon = strchr(copy, ':');
        if (colon)
            *colon = '\0';
        int r = sb_policy_add_bind(p, copy, colon ? colon + 1 : NULL, err);
        free(copy);
        if (r < 0)
            return -1;
    } else if (strcmp(name, "--keep-workspace") == 0) {
        if (!*value)
            return err_set(err, ERR_USAGE,
                           "--keep-workspace needs a directory");
        free(p->keep_workspace_dir);
        p->keep_workspace_dir = xstrdup(value);
    }
    return used;
}

const char *
sb_policy_flags_help(void)
{
    return "sandbox limits:\n"
           "  --memory SIZE        memory incl. files in tmpfs (default 2G; "
           "no swap)\n"
           "  --cpus N             CPU quota, fractional allowed (default 1)\n"
           "  --pids N             processes and threads (default 128)\n"
           "  --disk SIZE          size of /mnt/data (default 512M)\n"
           "  --tmp SIZE           size of /tmp and of $HOME (default 256M)\n"
           "  --shm SIZE           size of /dev/shm (default 64M)\n"
           "  --nofile N           open files per process (default 4096)\n"
           "  --fsize SIZE         largest file a process may write "
           "(default: --disk)\n"
           "  --env NAME           pass NAME from this environment (never "
           "names with KEY,\n"
           "                       TOKEN, SECRET, PASS, CREDENTIAL or "
           "AUTH)\n"
           "  --bind HOST[:INSIDE] extra read-only bind mount\n"
           "  --keep-workspace DIR copy /mnt/data to DIR (new or empty) when "
           "the sandbox\n"
           "                       ends: no dot-files, links or exec bits; "
           "at most\n"
           "                       --disk bytes, 10000 entries, 16 levels\n"
           "  --force              ... or into an existing non-empty DIR "
           "(never\n"
           "                       overwriting a file there)\n"
           "  --keep-exec          files made executable in the box stay "
           "executable\n"
           "  SIZE is bytes or a number with K, M, G, T (binary): 512M, "
           "1.5G\n";
}

bool
sb_policy_env_name_is_secret(const char *name)
{
    static const char *const words[] = {"KEY",  "TOKEN",      "SECRET",
                                        "PASS", "CREDENTIAL", "AUTH"};
    char up[256];
    size_t n = strlen(name);
    if (n >= sizeof up)
        return true;
    for (size_t i = 0; i <= n; i++)
        up[i] = (char)toupper((unsigned char)name[i]);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(up, words[i]))
            return true;
    return false;
}

static void
s_env_push(char ***env, size_t *n, char *entry)
{
    /* Later entries replace earlier ones with the same name. */
    size_t nl = strcspn(entry, "=");
    for (size_t i = 0; i < *n; i++) {
        if (strncmp((*env)[i], entry, nl) == 0 && (*env)[i][nl] == '=') {
            free((*env)[i]);
            (*env)[i] = entry;
            return;
        }
    }
    *env = xrealloc(*env, (*n + 2) * sizeof(char *));
    (*env)[(*n)++] = entry;
    (*env)[*n] = NULL;
}

static const char *
s_env_get(char *const env[], const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, nl) == 0 && env[i][nl] == '=')
            return env[i] + nl + 1;
    return NULL;
}

char **
sb_policy_build_env(const sb_policy_t *p, char *const host_env[],
                    const char *const extra[])
{
    char **env = xcalloc(1, sizeof(char *));
    size_t n = 0;
    s_env_push(&env, &n,
               xstrdup("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"));
    s_env_push(&env, &n, xstrdup("HOME=" SB_HOME_PATH));
    s_env_push(&env, &n, xstrdup("LANG=C.UTF-8"));
    const char *term = s_env_get(host_env, "TERM");
    s_env_push(&env, &n, xasprintf("TERM=%s", term ? term : "dumb"));
    for (size_t i = 0; i < p->n_env_allow; i++) {
        const char *name = p->env_allow[i];
        const char *v = s_env_get(host_env, name);
        if (v && !sb_policy_env_name_is_secret(name))
            s_env_push(&env, &n, xasprintf("%s=%s", name, v));
    }
    for (size_t i = 0; extra && extra[i]; i++)
        if (strchr(extra[i], '='))
            s_env_push(&env, &n, xstrdup(extra[i]));
    return env;
}

void
sb_policy_env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

uint64_t
sb_policy_fsize(const sb_policy_t *p)
{
    if (p->fsize_bytes)
        return p->fsize_bytes;
    uint64_t m = p->workspace_bytes;
    if (p->tmp_bytes > m)
        m = p->tmp_bytes;
    if (p->shm_bytes > m)
        m = p->shm_bytes;
    return m;
}

json_t *
sb_policy_to_json(const sb_policy_t *p)
{
    json_t *env = json_array();
    for (size_t i = 0; i < p->n_env_allow; i++)
        json_array_append_new(env, json_string(p->env_allow[i]));
    json_t *binds = json_array();
    for (size_t i = 0; i < p->n_binds; i++)
        json_array_append_new(
            binds, json_pack("{s:s, s:s, s:b}", "host", p->binds[i].host,
                             "inside", p->binds[i].inside, "read_only", 1));
    return json_pack(
        "{s:I, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:o, s:s, "
        "s:s, s:[sssssss], s:s}",
        "memory_bytes", (json_int_t)p->memory_bytes, "swap_bytes",
        (json_int_t)p->swap_bytes, "pids", (int)p->pids, "cpus", p->cpus,
        "workspace_bytes", (json_int_t)p->workspace_bytes, "tmp_bytes",
        (json_int_t)p->tmp_bytes, "shm_bytes", (json_int_t)p->shm_bytes,
        "nofile", (json_int_t)p->nofile, "fsize_bytes",
        (json_int_t)sb_policy_fsize(p), "network", p->network ? 1 : 0,
        "env_allow", env, "binds", binds, "workspace", SB_WORKSPACE_PATH,
        "home", SB_HOME_PATH, "namespaces", "user", "pid", "net", "mount",
        "ipc", "uts", "cgroup", "seccomp",
        "default allow; deny table in sandbox/sb_seccomp.c");
}
