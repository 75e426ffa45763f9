/*
 * cliopt: getopt_long option arrays, dispatch and help from flag tables.
 */
#include "common/cliopt.h"

#include "common/xalloc.h"

#include <assert.h>
#include <string.h>

#define HELP_COLUMN 25 /* where help text starts, as in every usage text */

struct option *
cliopt_longopts(const struct option *own, const cliopt_group_t *groups,
                size_t ngroups)
{
    size_t n_own = 0, n = 0;
    while (own && own[n_own].name)
        n_own++;
    for (size_t g = 0; g < ngroups; g++)
        n += groups[g].n;
    struct option *o = xcalloc(n_own + n + 1, sizeof *o);
    if (n_own)
        memcpy(o, own, n_own * sizeof *o);
    size_t k = n_own;
    assert(ngroups < 64);
    for (size_t g = 0; g < ngroups; g++) {
        assert(groups[g].n < 64); /* and `given` has a bit per row */
        for (size_t r = 0; r < groups[g].n; r++, k++) {
            const cliopt_t *row = &groups[g].opt[r];
            o[k].name = row->name;
            o[k].has_arg = row->arg ? required_argument : no_argument;
            o[k].flag = NULL;
            o[k].val = CLIOPT_VAL((int)g, (int)r);
        }
    }
    return o;
}

/* Record that `row` of `group` was applied. */
static void
s_mark_given(const cliopt_group_t *group, const cliopt_t *row)
{
    size_t r = (size_t)(row - group->opt);
    if (group->given && r < 64)
        *group->given |= UINT64_C(1) << r;
}

int
cliopt_dispatch(const cliopt_group_t *groups, size_t ngroups, int val,
                const char *value, err_t *err)
{
    if (val < CLIOPT_VAL_BASE)
        return 0;
    size_t g = (size_t)(val - CLIOPT_VAL_BASE) / 256;
    size_t r = (size_t)(val - CLIOPT_VAL_BASE) % 256;
    if (g >= ngroups || r >= groups[g].n)
        return 0;
    const cliopt_t *row = &groups[g].opt[r];
    if (row->set(groups[g].target, row->arg ? value : NULL, err) < 0)
        return -1;
    s_mark_given(&groups[g], row);
    return 1;
}

const cliopt_t *
cliopt_given_needing(const cliopt_group_t *group)
{
    for (size_t r = 0; group->given && r < group->n; r++)
        if ((*group->given & (UINT64_C(1) << r)) && group->opt[r].needs)
            return &group->opt[r];
    return NULL;
}

const cliopt_t *
cliopt_find(const cliopt_group_t *group, const char *name)
{
    for (size_t r = 0; r < group->n; r++)
        if (strcmp(group->opt[r].name, name) == 0)
            return &group->opt[r];
    return NULL;
}

int
cliopt_apply(const cliopt_group_t *group, const char *flag, const char *next,
             err_t *err)
{
    if (strncmp(flag, "--", 2) != 0)
        return 0;
    char name[64];
    const char *eq = strchr(flag, '=');
    size_t len = eq ? (size_t)(eq - flag - 2) : strlen(flag + 2);
    if (len >= sizeof name)
        return 0;
    memcpy(name, flag + 2, len);
    name[len] = '\0';
    const cliopt_t *row = cliopt_find(group, name);
    if (!row)
        return 0;
    if (!row->arg) {
        if (eq)
            return err_set(err, ERR_USAGE, "--%s takes no value", name);
        if (row->set(group->target, NULL, err) < 0)
            return -1;
        s_mark_given(group, row);
        return 1;
    }
    const char *value = eq ? eq + 1 : next;
    if (!value)
        return err_set(err, ERR_USAGE, "--%s needs a value (%s)", name,
                       row->arg);
    if (row->set(group->target, value, err) < 0)
        return -1;
    s_mark_given(group, row);
    return eq ? 1 : 2;
}

void
cliopt_help(FILE *out, const cliopt_group_t *groups, size_t ngroups)
{
    for (size_t g = 0; g < ngroups; g++) {
        fprintf(out, "\n%s:\n", groups[g].title);
        for (size_t r = 0; r < groups[g].n; r++) {
            const cliopt_t *row = &groups[g].opt[r];
            int w = fprintf(out, "      --%s%s%s", row->name,
                            row->arg ? " " : "", row->arg ? row->arg : "");
            const char *h = row->help;
            if (w >= HELP_COLUMN) {
                fputc('\n', out);
                w = 0;
            }
            for (;;) {
                size_t len = strcspn(h, "\n");
                fprintf(out, "%*s%.*s\n", HELP_COLUMN - w, "", (int)len, h);
                if (!h[len])
                    break;
                h += len + 1;
                w = 0;
            }
        }
    }
}

/* Edits from a[0..la) to b[0..lb) (insert, delete, replace, swap of
 * neighbours), or more than `most` once that is certain. */
static size_t
s_distance(const char *a, size_t la, const char *b, size_t lb, size_t most)
{
    enum { MAXLEN = 64 };
    if (la >= MAXLEN || lb >= MAXLEN)
        return most + 1;
    size_t d[MAXLEN + 1][MAXLEN + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
                a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *
cliopt_suggest(const struct option *longopts, const char *typed)
{
    if (!typed || strncmp(typed, "--", 2) != 0)
        return NULL;
    typed += 2;
    size_t len = strcspn(typed, "=");
    if (!len)
        return NULL;
    const char *best = NULL;
    size_t best_d = 3;
    for (const struct option *o = longopts; o && o->name; o++) {
        size_t nl = strlen(o->name);
        size_t most = nl / 3 < 2 ? nl / 3 : 2;
        size_t d = s_distance(typed, len, o->name, nl, most);
        if (d > 0 && d <= most && d < best_d) {
            best = o->name;
            best_d = d;
        }
    }
    return best;
}
