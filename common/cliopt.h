/*
 * cliopt: command-line flags described once, as rows of a table, and
 * handed to getopt_long by every command that accepts them.
 *
 * A module that owns a group of flags (the sandbox policy, the session)
 * exports a table of cliopt_t rows; a command lists the groups it takes in
 * a cliopt_group_t array, builds its getopt_long option array with
 * cliopt_longopts() and gives every option getopt returns to
 * cliopt_dispatch() before its own switch. The help text of a group comes
 * from the same rows (cliopt_help), so flags, parser and help cannot drift.
 *
 * The `val` getopt returns for a row is CLIOPT_VAL(group, row): the
 * position in the tables, never a number written by hand.
 */
#ifndef COMMON_CLIOPT_H
#define COMMON_CLIOPT_H

#include "common/err.h"

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct cliopt {
    const char *name; /* long name without "--"; unique across groups */
    const char *arg;  /* placeholder in help ("SIZE"); NULL: takes no value */
    const char *help; /* help text; each '\n' starts a continuation line */
    /* Apply the flag to the group's target. `value` is NULL for a row
     * without `arg`. Returns 0, or -1 with ERR_USAGE in `err` and a text
     * that names the flag and the value. */
    int (*set)(void *target, const char *value, err_t *err);
    const char *example; /* a value set() accepts (help, tests) */
    const char *invalid; /* a value set() refuses; NULL if none exists */
    /* What must be there for the flag to mean anything ("the sandbox"),
     * or NULL when it always applies: cliopt_given_needing() finds a
     * given flag whose need the command cannot meet, to refuse it rather
     * than ignore it. */
    const char *needs;
} cliopt_t;

typedef struct cliopt_group {
    const char *title;   /* help heading, e.g. "sandbox limits" */
    const cliopt_t *opt; /* the rows (borrowed, usually static) */
    size_t n;            /* number of rows */
    void *target;        /* passed to every row's set() */
    uint64_t *given;     /* bit r set once row r was applied; may be NULL */
} cliopt_group_t;

/* A group over a static table `rows` (an array, not a pointer). */
#define CLIOPT_GROUP(title_, rows, target_)                                    \
    ((cliopt_group_t){.title = (title_),                                       \
                      .opt = (rows),                                           \
                      .n = sizeof(rows) / sizeof((rows)[0]),                   \
                      .target = (target_)})

/* getopt `val` of row `row` of group `group` (groups < 64, rows < 64). */
#define CLIOPT_VAL_BASE 0x10000
#define CLIOPT_VAL(group, row) (CLIOPT_VAL_BASE + (group)*256 + (row))

/* A new option array for getopt_long: the command's own options `own`
 * (terminated by a zero entry; may be NULL) followed by one entry per row
 * of each group, zero-terminated. Free with free(). */
struct option *cliopt_longopts(const struct option *own,
                               const cliopt_group_t *groups, size_t ngroups);

/* Handle an option getopt_long returned. 1: it was a group's row and was
 * applied; 0: not a group's option (the command handles it); -1: the row
 * refused the value (err filled). */
int cliopt_dispatch(const cliopt_group_t *groups, size_t ngroups, int val,
                    const char *value, err_t *err);

/* Apply "--name" or "--name=value" (with `next` as the value when none is
 * inline) from one group, for parsers that do not run getopt. Returns the
 * number of argv entries used (1 or 2), 0 when `flag` is no row of the
 * group, -1 with err filled when the value is missing or refused. */
int cliopt_apply(const cliopt_group_t *group, const char *flag,
                 const char *next, err_t *err);

/* The row named `name` (without "--") in `group`, or NULL. */
const cliopt_t *cliopt_find(const cliopt_group_t *group, const char *name);

/* The first row of `group` that was given (group->given) and has a
 * `needs`, or NULL. */
const cliopt_t *cliopt_given_needing(const cliopt_group_t *group);

/* The long option in `longopts` (zero-terminated) closest to what was
 * typed, for "did you mean --timeout?": `typed` is the argv entry getopt
 * refused ("--timout" or "--timout=5"). NULL when nothing is close (at
 * most 2 edits, a swap of neighbours counting as one, and fewer than a
 * third of the name's letters). Borrowed from `longopts`. */
const char *cliopt_suggest(const struct option *longopts, const char *typed);

/* Print each group's title and its rows, aligned the way every command's
 * own options are ("      --memory SIZE      text"). */
void cliopt_help(FILE *out, const cliopt_group_t *groups, size_t ngroups);

#endif
