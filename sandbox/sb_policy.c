/*
 * sb_policy: limits, flags, environment and JSON for a sandbox.
 */
#include "sandbox/sb_policy.h"

#include "common/size.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_egress_rule.h"
#include "sandbox/sb_egress_secret.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    p->engine = sb_engine_default();
    p->env_allow = xcalloc(1, sizeof(char *));
}

void
sb_policy_release(sb_policy_t *p)
{
    if (!p)
        return;
    strv_free(p->env_allow);
    strv_free(p->env_secret);
    for (size_t i = 0; i < p->n_binds; i++) {
        free(p->binds[i].host);
        free(p->binds[i].inside);
    }
    free(p->binds);
    free(p->keep_workspace_dir);
    free(p->allow_net);
    free(p->net_log);
    strv_free(p->net_secret);
    free(p->net_ca);
    memset(p, 0, sizeof *p);
}

/* The invariants stated in sb_policy.h. */
static void
s_check(const sb_policy_t *p)
{
    assert(p->memory_bytes > 0 && p->workspace_bytes > 0 && p->tmp_bytes > 0 &&
           p->shm_bytes > 0);
    assert(p->cpus > 0 && p->pids >= 1 && !p->network);
    assert(p->env_allow && !p->env_allow[p->n_env_allow]);
    assert(p->n_binds == 0 || p->binds);
    (void)p;
}

void
sb_policy_copy(sb_policy_t *dst, const sb_policy_t *src)
{
    s_check(src);
    *dst = *src;
    dst->env_allow = xcalloc(src->n_env_allow + 1, sizeof(char *));
    for (size_t i = 0; i < src->n_env_allow; i++)
        dst->env_allow[i] = xstrdup(src->env_allow[i]);
    dst->env_secret = NULL;
    if (src->n_env_secret) {
        dst->env_secret = xcalloc(src->n_env_secret + 1, sizeof(char *));
        for (size_t i = 0; i < src->n_env_secret; i++)
            dst->env_secret[i] = xstrdup(src->env_secret[i]);
    }
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
    dst->allow_net = src->allow_net ? xstrdup(src->allow_net) : NULL;
    dst->net_log = src->net_log ? xstrdup(src->net_log) : NULL;
    dst->net_secret = NULL;
    dst->n_net_secret = 0;
    for (size_t i = 0; i < src->n_net_secret; i++)
        strv_push(&dst->net_secret, &dst->n_net_secret,
                  xstrdup(src->net_secret[i]));
    dst->net_ca = src->net_ca ? xstrdup(src->net_ca) : NULL;
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

static int
s_allow_env(sb_policy_t *p, const char *flag, const char *name, bool secret,
            err_t *err)
{
    if (!s_valid_env_name(name))
        return err_set(err, ERR_USAGE,
                       "%s: '%s' is not a variable name (letters, digits "
                       "and '_'; the value is taken from the environment)",
                       flag, name ? name : "");
    char word[64];
    if (!secret && sb_policy_env_secret_word(name, word, sizeof word))
        return err_set(err, ERR_USAGE,
                       "--env %s: refused, the name looks like a secret (the "
                       "word '%s'), and secrets stay out of the box; to pass "
                       "it on purpose, use --env-secret %s",
                       name, word, name);
    strv_push(&p->env_allow, &p->n_env_allow, xstrdup(name));
    if (secret)
        strv_push(&p->env_secret, &p->n_env_secret, xstrdup(name));
    return 0;
}

int
sb_policy_allow_env(sb_policy_t *p, const char *name, err_t *err)
{
    return s_allow_env(p, "--env", name, false, err);
}

int
sb_policy_allow_env_secret(sb_policy_t *p, const char *name, err_t *err)
{
    return s_allow_env(p, "--env-secret", name, true, err);
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

/* A size flag: `value` parsed by the one size parser, at least `min`. */
static int
s_size(const char *flag, const char *value, uint64_t min, uint64_t *out,
       err_t *err)
{
    uint64_t n = 0;
    if (size_parse(value, &n) < 0)
        return err_set(err, ERR_USAGE,
                       "--%s: '%s' is not a size; use e.g. 512M or 2G", flag,
                       value);
    if (n == 0)
        return err_set(err, ERR_USAGE,
                       "--%s: a size of 0 leaves no room; give a size such "
                       "as 64M",
                       flag);
    if (n < min) {
        char b[32];
        return err_set(err, ERR_USAGE, "--%s: %s is too small; use at least %s",
                       flag, value, sb_policy_format_bytes(min, b, sizeof b));
    }
    *out = n;
    return 0;
}

/* A whole-number flag between `lo` and 2^22. */
static int
s_count(const char *flag, const char *value, uint64_t lo, uint64_t *out,
        err_t *err)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno || end == value || *end || !isdigit((unsigned char)value[0]) ||
        v < lo || v > (1ULL << 22))
        return err_set(err, ERR_USAGE,
                       "--%s: '%s' is not a whole number between %llu and "
                       "4194304",
                       flag, value, (unsigned long long)lo);
    *out = v;
    return 0;
}

static int
s_set_memory(void *p, const char *v, err_t *err)
{
    return s_size("memory", v, 16 * MIB, &((sb_policy_t *)p)->memory_bytes,
                  err);
}

static int
s_set_disk(void *p, const char *v, err_t *err)
{
    return s_size("disk", v, 1, &((sb_policy_t *)p)->workspace_bytes, err);
}

static int
s_set_tmp(void *p, const char *v, err_t *err)
{
    return s_size("tmp", v, 1, &((sb_policy_t *)p)->tmp_bytes, err);
}

static int
s_set_shm(void *p, const char *v, err_t *err)
{
    return s_size("shm", v, 1, &((sb_policy_t *)p)->shm_bytes, err);
}

static int
s_set_fsize(void *p, const char *v, err_t *err)
{
    return s_size("fsize", v, 1, &((sb_policy_t *)p)->fsize_bytes, err);
}

static int
s_set_cpus(void *p, const char *v, err_t *err)
{
    char *end = NULL;
    errno = 0;
    double c = strtod(v, &end);
    if (errno || end == v || *end || !(c >= 0.01) || c > 1024)
        return err_set(err, ERR_USAGE,
                       "--cpus: '%s' is not a CPU count between 0.01 and "
                       "1024 (e.g. 1.5)",
                       v);
    ((sb_policy_t *)p)->cpus = c;
    return 0;
}

static int
s_set_pids(void *p, const char *v, err_t *err)
{
    uint64_t n = 0;
    if (s_count("pids", v, 4, &n, err) < 0)
        return -1;
    ((sb_policy_t *)p)->pids = (unsigned)n;
    return 0;
}

static int
s_set_nofile(void *p, const char *v, err_t *err)
{
    return s_count("nofile", v, 16, &((sb_policy_t *)p)->nofile, err);
}

static int
s_set_env(void *p, const char *v, err_t *err)
{
    return sb_policy_allow_env(p, v, err);
}

static int
s_set_env_secret(void *p, const char *v, err_t *err)
{
    return sb_policy_allow_env_secret(p, v, err);
}

static int
s_set_bind(void *p, const char *v, err_t *err)
{
    char *copy = xstrdup(v);
    char *colon = strchr(copy, ':');
    if (colon)
        *colon = '\0';
    int r = sb_policy_add_bind(p, copy, colon ? colon + 1 : NULL, err);
    free(copy);
    return r;
}

static int
s_set_keep_workspace(void *p, const char *v, err_t *err)
{
    sb_policy_t *pol = p;
    if (!*v)
        return err_set(err, ERR_USAGE, "--keep-workspace needs a directory");
    free(pol->keep_workspace_dir);
    pol->keep_workspace_dir = xstrdup(v);
    return 0;
}

static int
s_set_force(void *p, const char *v, err_t *err)
{
    (void)v;
    (void)err;
    ((sb_policy_t *)p)->out_force = true;
    return 0;
}

static int
s_set_keep_exec(void *p, const char *v, err_t *err)
{
    (void)v;
    (void)err;
    ((sb_policy_t *)p)->out_keep_exec = true;
    return 0;
}

static int
s_set_seccomp_audit(void *p, const char *v, err_t *err)
{
    (void)v;
    (void)err;
    ((sb_policy_t *)p)->seccomp_audit = true;
    return 0;
}

static int
s_set_engine(void *p, const char *v, err_t *err)
{
    return sb_engine_parse(v, &((sb_policy_t *)p)->engine, err);
}

static int
s_set_network(void *p, const char *v, err_t *err)
{
    (void)p;
    (void)v;
    return err_set(err, ERR_USAGE,
                   "--network: sandboxes have no network (loopback only); "
                   "bring data in with --file instead");
}

static int
s_set_allow_net(void *p, const char *v, err_t *err)
{
    sb_policy_t *pol = p;
    char *all =
        pol->allow_net ? xasprintf("%s,%s", pol->allow_net, v) : xstrdup(v);
    sb_egress_rules_t *rs = xcalloc(1, sizeof *rs);
    int r = sb_egress_rules_parse(rs, all, err);
    free(rs);
    if (r < 0) {
        free(all);
        return -1;
    }
    free(pol->allow_net);
    pol->allow_net = all;
    return 0;
}

static int
s_set_net_log(void *p, const char *v, err_t *err)
{
    sb_policy_t *pol = p;
    if (!*v)
        return err_set(err, ERR_USAGE, "--net-log needs a file");
    free(pol->net_log);
    pol->net_log = xstrdup(v);
    return 0;
}

static int
s_set_net_secret(void *p, const char *v, err_t *err)
{
    sb_policy_t *pol = p;
    sb_egress_secret_spec_t spec;
    if (sb_egress_secret_spec_parse(v, &spec, err) < 0)
        return -1;
    if (access(spec.file, R_OK) < 0)
        return err_errno(err, ERR_USAGE, "--net-secret: cannot read %s",
                         spec.file);
    if (pol->n_net_secret == SB_EGRESS_MAX_SECRETS)
        return err_set(err, ERR_USAGE, "--net-secret: more than %d",
                       SB_EGRESS_MAX_SECRETS);
    for (size_t i = 0; i < pol->n_net_secret; i++) {
        sb_egress_secret_spec_t o;
        if (sb_egress_secret_spec_parse(pol->net_secret[i], &o, NULL) == 0 &&
            strcmp(o.host, spec.host) == 0)
            return err_set(err, ERR_USAGE,
                           "--net-secret: %s has a secret already (one "
                           "header per host)",
                           spec.host);
    }
    strv_push(&pol->net_secret, &pol->n_net_secret, xstrdup(v));
    return 0;
}

static int
s_set_net_ca(void *p, const char *v, err_t *err)
{
    sb_policy_t *pol = p;
    if (!*v || access(v, R_OK) < 0)
        return err_errno(err, ERR_USAGE, "--net-ca: cannot read '%s'", v);
    free(pol->net_ca);
    pol->net_ca = xstrdup(v);
    return 0;
}

/* What the rows that shape the box need: without it (--no-sandbox)
 * nothing would enforce them, and ag_session refuses them. */
#define S_NEEDS_BOX "the sandbox"

/* The policy flags. To add one: a row here (name, placeholder, help, a
 * setter that keeps the invariants in sb_policy.h, a value it accepts and
 * one it refuses); every command that starts a sandbox then accepts it,
 * lists it in --help, and tests/unit/test_policy_flags checks both. */
static const cliopt_t s_flags[] = {
    {"memory", "SIZE", "memory incl. files in tmpfs (default 2G; no swap)",
     s_set_memory, "1G", "lots", S_NEEDS_BOX},
    {"cpus", "N", "CPU quota, fractional allowed (default 1)", s_set_cpus,
     "1.5", "0", S_NEEDS_BOX},
    {"pids", "N", "processes and threads (default 128)", s_set_pids, "64", "1",
     S_NEEDS_BOX},
    {"disk", "SIZE", "size of /mnt/data (default 512M)", s_set_disk, "1G", "0",
     S_NEEDS_BOX},
    {"tmp", "SIZE", "size of /tmp and of $HOME (default 256M)", s_set_tmp,
     "128M", "-1M", S_NEEDS_BOX},
    {"shm", "SIZE", "size of /dev/shm (default 64M)", s_set_shm, "32M", "2X",
     S_NEEDS_BOX},
    {"nofile", "N", "open files per process (default 4096)", s_set_nofile,
     "1024", "8", S_NEEDS_BOX},
    {"fsize", "SIZE",
     "largest file a process may write (default: the\n"
     "largest of --disk, --tmp and --shm)",
     s_set_fsize, "100M", "0", S_NEEDS_BOX},
    {"env", "NAME",
     "pass NAME from this environment; a name that\n"
     "looks like a secret (a word KEY, TOKEN, SECRET,\n"
     "PASS(WORD), CREDENTIAL, AUTH ...) is refused",
     s_set_env, "MY_SETTING", "A=B", S_NEEDS_BOX},
    {"env-secret", "NAME",
     "pass NAME although it looks like a secret (its\n"
     "value is then readable by the code in the box)",
     s_set_env_secret, "GITHUB_TOKEN", "A=B", S_NEEDS_BOX},
    {"bind", "HOST[:INSIDE]", "extra read-only bind mount", s_set_bind,
     "/usr/share/doc:/opt/doc", "relative", S_NEEDS_BOX},
    {"keep-workspace", "DIR",
     "copy /mnt/data to DIR (new or empty) when the\n"
     "sandbox ends: no dot-files, links or exec bits; at\n"
     "most --disk bytes, 10000 entries, 16 levels",
     s_set_keep_workspace, "kept-workspace", "", S_NEEDS_BOX},
    {"force", NULL,
     "files out (--keep-workspace, ask's SESSION_files,\n"
     "exec --out) may go into an existing non-empty\n"
     "directory; nothing there is overwritten",
     s_set_force, "", NULL, NULL},
    {"keep-exec", NULL,
     "files out keep an exec bit set in the box (0755;\n"
     "never setuid or setgid)",
     s_set_keep_exec, "", NULL, NULL},
    {"seccomp-audit", NULL,
     "let through, and report at the end, the system\n"
     "calls the seccomp allow list lacks (for new\n"
     "kernels and runtimes; a box of its own)",
     s_set_seccomp_audit, NULL, NULL, S_NEEDS_BOX},
    {"engine", "NAME",
     "what runs the box: namespaces (the host kernel,\n"
     "default) or gvisor (runsc's user-space kernel);\n"
     "default $JUPYTER_AGENT_ENGINE",
     s_set_engine, "gvisor", "vm", S_NEEDS_BOX},
    {"allow-net", "RULE[,RULE]",
     "a way out through a proxy outside the box, to\n"
     "these only: host, *.domain, host:port, IP or\n"
     "CIDR (docs/egress.md); default: no network",
     s_set_allow_net, "pypi.org,*.pythonhosted.org", "http://x", S_NEEDS_BOX},
    {"net-log", "FILE",
     "append a JSON line per --allow-net connection\n"
     "(allowed or refused) to FILE",
     s_set_net_log, "net.jsonl", "", S_NEEDS_BOX},
    {"net-secret", "HOST:HEADER=@FILE",
     "add HEADER (its value read from FILE) to HTTPS\n"
     "requests to HOST at the proxy, which terminates\n"
     "TLS with a CA only this box trusts: the secret\n"
     "never enters the box (http://HOST:... also plain\n"
     "HTTP; docs/egress.md)",
     s_set_net_secret, "api.test:Authorization=@/dev/null", "api.test",
     S_NEEDS_BOX},
    {"net-ca", "FILE",
     "also trust these PEM CA certificates for HTTPS\n"
     "upstreams (--net-secret) and in the box",
     s_set_net_ca, "/dev/null", "", S_NEEDS_BOX},
    {"network", NULL,
     "refused: a sandbox has loopback only; bring data\n"
     "in with --file",
     s_set_network, NULL, "", S_NEEDS_BOX},
};

bool
sb_policy_flag_given(const sb_policy_t *p, const char *name)
{
    for (size_t i = 0; i < sizeof s_flags / sizeof s_flags[0]; i++)
        if (strcmp(s_flags[i].name, name) == 0)
            return (p->given >> i) & 1;
    return false;
}

void
sb_policy_out_opts(const sb_policy_t *p, sb_files_out_opts_t *o)
{
    sb_files_out_opts_init(o, p->workspace_bytes);
    o->force = p->out_force;
    o->keep_exec = p->out_keep_exec;
    o->on_file = p->files_out_fn;
    o->on_file_arg = p->files_out_arg;
}

cliopt_group_t
sb_policy_flags(sb_policy_t *p)
{
    cliopt_group_t g =
        CLIOPT_GROUP("sandbox limits (SIZE: bytes, or a number with K, M, "
                     "G, T; binary)",
                     s_flags, p);
    g.given = &p->given;
    return g;
}

int
sb_policy_parse_flag(sb_policy_t *p, const char *flag, const char *value,
                     err_t *err)
{
    cliopt_group_t g = sb_policy_flags(p);
    int used = cliopt_apply(&g, flag, value, err);
    s_check(p);
    return used;
}

/* Is the upper-case word `w` (length n, a trailing S dropped by the
 * caller too) a secret's? */
static bool
s_secret_word(const char *w, size_t n)
{
    static const char *const whole[] = {
        "KEY",           "TOKEN",      "SECRET",     "PASS",  "PASSWD",
        "PASSWORD",      "PASSPHRASE", "CREDENTIAL", "CREDS", "AUTH",
        "AUTHORIZATION", "COOKIE",     "PAT"};
    static const char *const tails[] = {"KEY",      "TOKEN",  "SECRET",
                                        "PASSWORD", "PASSWD", "CREDENTIAL"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strlen(whole[i]) == n && memcmp(w, whole[i], n) == 0)
            return true;
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t k = strlen(tails[i]);
        if (n > k && memcmp(w + n - k, tails[i], k) == 0)
            return true;
    }
    return false;
}

bool
sb_policy_env_secret_word(const char *name, char *word, size_t size)
{
    const char *p = name;
    while (*p) {
        size_t n = strcspn(p, "_");
        char up[128];
        if (n >= sizeof up) { /* a word this long: nobody's plain setting */
            snprintf(word, size, "%.*s", (int)n, p);
            return true;
        }
        for (size_t i = 0; i < n; i++)
            up[i] = (char)toupper((unsigned char)p[i]);
        if (n && (s_secret_word(up, n) ||
                  (n > 1 && up[n - 1] == 'S' && s_secret_word(up, n - 1)))) {
            snprintf(word, size, "%.*s", (int)n, p);
            return true;
        }
        p += n;
        if (*p == '_')
            p++;
    }
    return false;
}

bool
sb_policy_env_name_is_secret(const char *name)
{
    char word[64];
    return sb_policy_env_secret_word(name, word, sizeof word);
}

static bool
s_env_secret_allowed(const sb_policy_t *p, const char *name)
{
    for (size_t i = 0; i < p->n_env_secret; i++)
        if (strcmp(p->env_secret[i], name) == 0)
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
               xstrdup("PATH=" SB_BIN_PATH
                       ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"));
    s_env_push(&env, &n, xstrdup("HOME=" SB_HOME_PATH));
    s_env_push(&env, &n, xstrdup("LANG=C.UTF-8"));
    const char *term = s_env_get(host_env, "TERM");
    s_env_push(&env, &n, xasprintf("TERM=%s", term ? term : "dumb"));
    if (p->allow_net) { /* the one way out (docs/egress.md) */
        static const char *const names[] = {
            "HTTP_PROXY",  "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
            "https_proxy", "all_proxy",   "PIP_PROXY"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            s_env_push(
                &env, &n,
                xasprintf("%s=http://127.0.0.1:%d", names[i], SB_EGRESS_PORT));
        s_env_push(&env, &n, xstrdup("NO_PROXY=localhost,127.0.0.1,::1"));
        s_env_push(&env, &n, xstrdup("no_proxy=localhost,127.0.0.1,::1"));
        static const char *const ca[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                         "PIP_CERT", "CURL_CA_BUNDLE",
                                         "NODE_EXTRA_CA_CERTS"};
        for (size_t i = 0;
             (p->n_net_secret || p->net_ca) && i < sizeof ca / sizeof ca[0];
             i++)
            s_env_push(&env, &n,
                       xasprintf("%s=%s", ca[i], SB_EGRESS_CA_BUNDLE));
    }
    for (size_t i = 0; i < p->n_env_allow; i++) {
        const char *name = p->env_allow[i];
        const char *v = s_env_get(host_env, name);
        if (v && (!sb_policy_env_name_is_secret(name) ||
                  s_env_secret_allowed(p, name)))
            s_env_push(&env, &n, xasprintf("%s=%s", name, v));
    }
    for (size_t i = 0; extra && extra[i]; i++)
        if (strchr(extra[i], '='))
            s_env_push(&env, &n, xstrdup(extra[i]));
    return env;
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
    s_check(p);
    json_t *env = json_array();
    for (size_t i = 0; i < p->n_env_allow; i++)
        json_array_append_new(env, json_string(p->env_allow[i]));
    json_t *binds = json_array();
    for (size_t i = 0; i < p->n_binds; i++)
        json_array_append_new(
            binds, json_pack("{s:s, s:s, s:b}", "host", p->binds[i].host,
                             "inside", p->binds[i].inside, "read_only", 1));
    bool gv = p->engine == SB_ENGINE_GVISOR;
    json_t *j = json_pack(
        "{s:I, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:o, s:s, "
        "s:s, s:[sssssss], s:s}",
        "memory_bytes", (json_int_t)p->memory_bytes, "swap_bytes",
        (json_int_t)p->swap_bytes, "pids", (int)p->pids, "cpus", p->cpus,
        "workspace_bytes", (json_int_t)p->workspace_bytes, "tmp_bytes",
        (json_int_t)p->tmp_bytes, "shm_bytes", (json_int_t)p->shm_bytes,
        "nofile", (json_int_t)p->nofile, "fsize_bytes",
        (json_int_t)sb_policy_fsize(p), "network", p->network ? 1 : 0,
        "env_allow", env, "binds", binds, "workspace", SB_WORKSPACE_PATH,
        "home",
        p->home_is_workspace ? SB_HOME_PATH " (= " SB_WORKSPACE_PATH ")"
                             : SB_HOME_PATH,
        "namespaces", "user", "pid", "net", "mount", "ipc", "uts", "cgroup",
        "seccomp",
        p->seccomp_audit
            ? "audit: the allow list of sandbox/sb_seccomp.c, with calls "
              "outside it let through and counted (deny rows still fail)"
            : "allow list: system calls outside the table in "
              "sandbox/sb_seccomp.c fail with EPERM (see 'jupyter-agent "
              "sandbox --seccomp-table')");
    json_object_set_new(j, "engine", json_string(sb_engine_name(p->engine)));
    if (p->allow_net)
        json_object_set_new(j, "allow_net", json_string(p->allow_net));
    if (p->n_net_secret) { /* hosts and header names: never the values */
        json_t *secrets = json_array();
        for (size_t i = 0; i < p->n_net_secret; i++) {
            sb_egress_secret_spec_t s;
            if (sb_egress_secret_spec_parse(p->net_secret[i], &s, NULL) == 0)
                json_array_append_new(secrets,
                                      json_pack("{s:s, s:s, s:b}", "host",
                                                s.host, "header", s.header,
                                                "plain_http", s.plain ? 1 : 0));
        }
        json_object_set_new(j, "net_secret", secrets);
    }
    if (p->net_ca)
        json_object_set_new(j, "net_ca", json_string(p->net_ca));
    if (gv) {
        json_object_set_new(j, "namespaces", json_string("gVisor sandbox"));
        json_object_set_new(j, "seccomp",
                            json_string("gVisor: every system call is "
                                        "answered by runsc's user-space "
                                        "kernel; the host sees only its own "
                                        "filtered calls"));
    }
    return j;
}
