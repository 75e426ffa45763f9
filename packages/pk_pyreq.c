#include "packages/pk_pyreq.h"

#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* --- versions (PEP 440) --------------------------------------------------- */

#define MAX_RELEASE 16

typedef struct pyver {
    long epoch;            /* N! prefix, 0 when absent */
    long rel[MAX_RELEASE]; /* release segments */
    int nrel;              /* how many */
    int pre_kind;          /* -1 none, 0 a, 1 b, 2 rc */
    long pre;              /* pre-release number */
    bool has_post;         /* a post-release */
    long post;             /* its number */
    bool has_dev;          /* a dev release */
    long dev;              /* its number */
} pyver_t;

static bool
s_num(const char **p, long *out)
{
    if (!isdigit((unsigned char)**p))
        return false;
    errno = 0;
    char *end;
    long v = strtol(*p, &end, 10);
    if (errno)
        return false;
    *out = v;
    *p = end;
    return true;
}

static void
s_sep(const char **p)
{
    if (**p == '.' || **p == '-' || **p == '_')
        (*p)++;
}

/* Match one of `words` (longest first) at *p, case-insensitively. */
static int
s_word(const char **p, const char *const *words, int n)
{
    for (int i = 0; i < n; i++) {
        size_t l = strlen(words[i]);
        if (strncasecmp(*p, words[i], l) == 0) {
            *p += l;
            return i;
        }
    }
    return -1;
}

static bool
s_ver_parse(const char *s, pyver_t *v)
{
    static const char *const pre_words[] = {"preview", "alpha", "beta", "pre",
                                            "rc",      "a",     "b",    "c"};
    static const int pre_kind[] = {2, 0, 1, 2, 2, 0, 1, 2};
    static const char *const post_words[] = {"post", "rev", "r"};
    memset(v, 0, sizeof *v);
    v->pre_kind = -1;
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == 'v' || *p == 'V')
        p++;
    long n;
    if (!s_num(&p, &n))
        return false;
    if (*p == '!') {
        v->epoch = n;
        p++;
        if (!s_num(&p, &n))
            return false;
    }
    v->rel[v->nrel++] = n;
    while (*p == '.' && isdigit((unsigned char)p[1])) {
        p++;
        if (!s_num(&p, &n) || v->nrel == MAX_RELEASE)
            return false;
        v->rel[v->nrel++] = n;
    }
    const char *save = p;
    s_sep(&p);
    int w = s_word(&p, pre_words, 8);
    if (w >= 0) {
        v->pre_kind = pre_kind[w];
        s_sep(&p);
        if (!s_num(&p, &v->pre))
            v->pre = 0;
    } else {
        p = save;
    }
    save = p;
    if (*p == '-' && isdigit((unsigned char)p[1])) {
        p++;
        s_num(&p, &v->post);
        v->has_post = true;
    } else {
        s_sep(&p);
        if (s_word(&p, post_words, 3) >= 0) {
            v->has_post = true;
            s_sep(&p);
            if (!s_num(&p, &v->post))
                v->post = 0;
        } else {
            p = save;
        }
    }
    save = p;
    s_sep(&p);
    if (strncasecmp(p, "dev", 3) == 0) {
        p += 3;
        v->has_dev = true;
        s_sep(&p);
        if (!s_num(&p, &v->dev))
            v->dev = 0;
    } else {
        p = save;
    }
    if (*p == '+') { /* local label: accepted, not ordered */
        p++;
        if (!isalnum((unsigned char)*p))
            return false;
        while (isalnum((unsigned char)*p) || *p == '.' || *p == '-' ||
               *p == '_')
            p++;
    }
    while (isspace((unsigned char)*p))
        p++;
    return *p == '\0';
}

static int
s_lcmp(long a, long b)
{
    return a < b ? -1 : a > b;
}

static int
s_ver_cmp(const pyver_t *a, const pyver_t *b)
{
    int c = s_lcmp(a->epoch, b->epoch);
    if (c)
        return c;
    int n = a->nrel > b->nrel ? a->nrel : b->nrel;
    for (int i = 0; i < n; i++) {
        c = s_lcmp(i < a->nrel ? a->rel[i] : 0, i < b->nrel ? b->rel[i] : 0);
        if (c)
            return c;
    }
    /* pre: a dev-only release sorts before every pre-release; a final
     * (no pre) after all of them. */
    long apk = a->pre_kind >= 0               ? a->pre_kind
               : (a->has_dev && !a->has_post) ? -2
                                              : 3;
    long bpk = b->pre_kind >= 0               ? b->pre_kind
               : (b->has_dev && !b->has_post) ? -2
                                              : 3;
    if ((c = s_lcmp(apk, bpk)))
        return c;
    if (a->pre_kind >= 0 && (c = s_lcmp(a->pre, b->pre)))
        return c;
    if ((c = s_lcmp(a->has_post ? a->post : -1, b->has_post ? b->post : -1)))
        return c;
    return s_lcmp(a->has_dev ? a->dev : LONG_MAX,
                  b->has_dev ? b->dev : LONG_MAX);
}

int
pk_pyver_cmp(const char *a, const char *b, bool *ok)
{
    pyver_t va, vb;
    if (!s_ver_parse(a, &va) || !s_ver_parse(b, &vb)) {
        if (ok)
            *ok = false;
        int c = strcmp(a, b);
        return c < 0 ? -1 : c > 0;
    }
    if (ok)
        *ok = true;
    return s_ver_cmp(&va, &vb);
}

/* --- specifiers ----------------------------------------------------------- */

/* One clause "OPversion"; 1 match, 0 no, -1 malformed. */
static int
s_clause(const char *clause, const char *version)
{
    static const char *const ops[] = {
        "===", "==", "!=", "~=", "<=", ">=", "<", ">"};
    const char *p = clause;
    int op = s_word(&p, ops, 8);
    if (op < 0 || !*p)
        return -1;
    if (op == 0)
        return strcasecmp(p, version) == 0;
    pyver_t cand;
    bool wildcard = false;
    char *spec = xstrdup(p);
    size_t sl = strlen(spec);
    if (sl > 2 && strcmp(spec + sl - 2, ".*") == 0) {
        if (op != 1 && op != 2) {
            free(spec);
            return -1;
        }
        spec[sl - 2] = '\0';
        wildcard = true;
    }
    pyver_t sv;
    bool spec_ok = s_ver_parse(spec, &sv);
    free(spec);
    if (!spec_ok)
        return -1;
    if (!s_ver_parse(version, &cand))
        return 0; /* not a version: matches nothing */
    if (wildcard) {
        /* Prefix match on epoch and release, ignoring pre/post/dev. */
        bool eq = cand.epoch == sv.epoch;
        for (int i = 0; eq && i < sv.nrel; i++)
            eq = (i < cand.nrel ? cand.rel[i] : 0) == sv.rel[i];
        return op == 1 ? eq : !eq;
    }
    int c = s_ver_cmp(&cand, &sv);
    switch (op) {
    case 1:
        return c == 0;
    case 2:
        return c != 0;
    case 3: { /* ~=V: >= V and == V's release without its last part .* */
        if (sv.nrel < 2)
            return -1;
        if (c < 0)
            return 0;
        if (cand.epoch != sv.epoch)
            return 0;
        for (int i = 0; i < sv.nrel - 1; i++)
            if ((i < cand.nrel ? cand.rel[i] : 0) != sv.rel[i])
                return 0;
        return 1;
    }
    case 4:
        return c <= 0;
    case 5:
        return c >= 0;
    case 6:
        return c < 0;
    default:
        return c > 0;
    }
}

int
pk_pyreq_spec_match(const char *specifier, const char *version, err_t *err)
{
    char *copy = xstrdup(specifier);
    int result = 1;
    char *save = NULL;
    for (char *c = strtok_r(copy, ",", &save); c;
         c = strtok_r(NULL, ",", &save)) {
        char *t = c;
        while (isspace((unsigned char)*t))
            t++;
        size_t l = strlen(t);
        while (l && isspace((unsigned char)t[l - 1]))
            t[--l] = '\0';
        if (!*t)
            continue;
        int m = s_clause(t, version);
        if (m < 0) {
            err_set(err, ERR_USAGE, "'%s' is not a version specifier", t);
            result = -1;
            break;
        }
        if (!m)
            result = 0;
    }
    free(copy);
    return result;
}

/* --- requirements (PEP 508) --------------------------------------------------
 */

static const char *
s_skip_ws(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

static char *
s_strip_ws(const char *s, size_t n)
{
    char *out = xmalloc(n + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            out[j++] = s[i];
    out[j] = '\0';
    return out;
}

static char *
s_trim(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return xstrndup(s, n);
}

void
pk_pyreq_release(pk_pyreq_t *r)
{
    free(r->name);
    free(r->extras);
    free(r->specifier);
    free(r->url);
    free(r->marker);
    memset(r, 0, sizeof *r);
}

int
pk_pyreq_parse(const char *text, pk_pyreq_t *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    const char *p = s_skip_ws(text);
    const char *start = p;
    if (!isalnum((unsigned char)*p))
        return err_set(err, ERR_USAGE, "requirement '%s' has no project name",
                       text);
    while (isalnum((unsigned char)*p) || *p == '.' || *p == '-' || *p == '_')
        p++;
    out->name = xstrndup(start, (size_t)(p - start));
    p = s_skip_ws(p);
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close)
            goto bad;
        out->extras = s_strip_ws(p + 1, (size_t)(close - p - 1));
        p = s_skip_ws(close + 1);
    }
    const char *semi = strchr(p, ';');
    const char *end = semi ? semi : p + strlen(p);
    if (*p == '@') {
        out->url = s_trim(p + 1, (size_t)(end - p - 1));
        out->specifier = xstrdup("");
    } else if (*p == '(') {
        const char *close = memchr(p, ')', (size_t)(end - p));
        if (!close || *s_skip_ws(close + 1) != (semi ? ';' : '\0'))
            goto bad;
        out->specifier = s_strip_ws(p + 1, (size_t)(close - p - 1));
    } else {
        out->specifier = s_strip_ws(p, (size_t)(end - p));
    }
    if (out->specifier[0] && !strchr("<>=!~", out->specifier[0]))
        goto bad;
    if (semi)
        out->marker = s_trim(semi + 1, strlen(semi + 1));
    return 0;
bad:
    pk_pyreq_release(out);
    return err_set(err, ERR_USAGE, "cannot parse requirement '%s'", text);
}

/* --- markers ------------------------------------------------------------ */

typedef struct marker_parser {
    const char *p;     /* next character */
    const json_t *env; /* marker variables, borrowed */
    const char *extra; /* the extra being installed or NULL */
    err_t *err;        /* where a failure goes */
    bool failed;       /* a failure was recorded */
} marker_parser_t;

static void
s_fail(marker_parser_t *m, const char *what)
{
    if (!m->failed)
        err_set(m->err, ERR_USAGE, "environment marker: %s near '%.40s'", what,
                m->p);
    m->failed = true;
}

static bool
s_keyword(marker_parser_t *m, const char *kw)
{
    const char *p = s_skip_ws(m->p);
    size_t l = strlen(kw);
    if (strncmp(p, kw, l) == 0 && !isalnum((unsigned char)p[l]) &&
        p[l] != '_') {
        m->p = p + l;
        return true;
    }
    return false;
}

/* PEP 685 / 503 normalization for extra names. */
static char *
s_norm(const char *s)
{
    char *out = xmalloc(strlen(s) + 1);
    size_t j = 0;
    for (const char *c = s; *c; c++) {
        if (*c == '-' || *c == '_' || *c == '.') {
            if (j == 0 || out[j - 1] != '-')
                out[j++] = '-';
        } else {
            out[j++] = (char)tolower((unsigned char)*c);
        }
    }
    out[j] = '\0';
    return out;
}

/* A value: a quoted string or a variable. New string, or NULL. *is_extra
 * tells whether it was the `extra` variable. */
static char *
s_value(marker_parser_t *m, bool *is_extra)
{
    const char *p = s_skip_ws(m->p);
    *is_extra = false;
    if (*p == '"' || *p == '\'') {
        const char *close = strchr(p + 1, *p);
        if (!close) {
            m->p = p;
            s_fail(m, "unterminated string");
            return NULL;
        }
        m->p = close + 1;
        return xstrndup(p + 1, (size_t)(close - p - 1));
    }
    const char *start = p;
    while (isalnum((unsigned char)*p) || *p == '_' || *p == '.')
        p++;
    if (p == start) {
        m->p = start;
        s_fail(m, "expected a variable or a quoted string");
        return NULL;
    }
    char *name = xstrndup(start, (size_t)(p - start));
    m->p = p;
    for (char *c = name; *c; c++)
        if (*c == '.')
            *c = '_';
    if (strcmp(name, "python_implementation") == 0) {
        free(name);
        name = xstrdup("platform_python_implementation");
    }
    if (strcmp(name, "extra") == 0) {
        free(name);
        *is_extra = true;
        return xstrdup(m->extra ? m->extra : "");
    }
    const char *v = json_string_value(json_object_get(m->env, name));
    if (!v) {
        m->p = start;
        s_fail(m, "unknown marker variable");
        free(name);
        return NULL;
    }
    free(name);
    return xstrdup(v);
}

static bool s_or(marker_parser_t *m);

static bool
s_compare(const char *lhs, const char *op, const char *rhs)
{
    if (strcmp(op, "in") == 0)
        return strstr(rhs, lhs) != NULL;
    if (strcmp(op, "not in") == 0)
        return strstr(rhs, lhs) == NULL;
    /* Version comparison when the right side is a version. */
    char *spec = xasprintf("%s%s", op, rhs);
    int r = pk_pyreq_spec_match(spec, lhs, NULL);
    free(spec);
    bool ok = false;
    pk_pyver_cmp(lhs, rhs, &ok);
    if (r >= 0 && ok)
        return r == 1;
    int c = strcmp(lhs, rhs);
    if (strcmp(op, "==") == 0 || strcmp(op, "===") == 0)
        return c == 0;
    if (strcmp(op, "!=") == 0)
        return c != 0;
    if (strcmp(op, "<") == 0)
        return c < 0;
    if (strcmp(op, "<=") == 0)
        return c <= 0;
    if (strcmp(op, ">") == 0)
        return c > 0;
    if (strcmp(op, ">=") == 0)
        return c >= 0;
    return false; /* ~= on non-versions */
}

static bool
s_atom(marker_parser_t *m)
{
    static const char *const ops[] = {
        "===", "==", "!=", "~=", "<=", ">=", "<", ">"};
    m->p = s_skip_ws(m->p);
    if (*m->p == '(') {
        m->p++;
        bool v = s_or(m);
        m->p = s_skip_ws(m->p);
        if (*m->p != ')') {
            s_fail(m, "expected ')'");
            return false;
        }
        m->p++;
        return v;
    }
    bool lx, rx;
    char *lhs = s_value(m, &lx);
    if (!lhs)
        return false;
    const char *op = NULL;
    m->p = s_skip_ws(m->p);
    int w = s_word(&m->p, ops, 8);
    if (w >= 0)
        op = ops[w];
    else if (s_keyword(m, "in"))
        op = "in";
    else if (s_keyword(m, "not") && s_keyword(m, "in"))
        op = "not in";
    if (!op) {
        s_fail(m, "expected a comparison operator");
        free(lhs);
        return false;
    }
    char *rhs = s_value(m, &rx);
    if (!rhs) {
        free(lhs);
        return false;
    }
    if (lx || rx) { /* extras compare normalized */
        char *a = s_norm(lhs), *b = s_norm(rhs);
        free(lhs);
        free(rhs);
        lhs = a;
        rhs = b;
    }
    bool v = s_compare(lhs, op, rhs);
    free(lhs);
    free(rhs);
    return v;
}

static bool
s_and(marker_parser_t *m)
{
    bool v = s_atom(m);
    while (!m->failed && s_keyword(m, "and"))
        v = s_atom(m) && v;
    return v;
}

static bool
s_or(marker_parser_t *m)
{
    bool v = s_and(m);
    while (!m->failed && s_keyword(m, "or"))
        v = s_and(m) || v;
    return v;
}

int
pk_pyreq_marker_eval(const char *marker, const json_t *env, const char *extra,
                     bool *result, err_t *err)
{
    marker_parser_t m = {.p = marker, .env = env, .extra = extra, .err = err};
    bool v = s_or(&m);
    if (!m.failed && *s_skip_ws(m.p))
        s_fail(&m, "unexpected text");
    if (m.failed)
        return -1;
    *result = v;
    return 0;
}
