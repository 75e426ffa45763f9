/*
 * ag_cmd: the subcommands of the jupyter-agent binary.
 *
 * Each takes argv with argv[0] = the subcommand's name and returns the
 * process exit code (see common/err.h and README "Exit codes"). Each lives
 * in its own agent/cli/cmd_NAME.c file.
 */
#ifndef AGENT_CLI_AG_CMD_H
#define AGENT_CLI_AG_CMD_H

#include "agent/session/ag_session.h"
#include "common/cliopt.h"
#include "common/err.h"

#include <getopt.h>
#include <stddef.h>

int ag_cmd_exec(int argc, char **argv);
int ag_cmd_run(int argc, char **argv);
int ag_cmd_ask(int argc, char **argv);
int ag_cmd_kernel(int argc, char **argv);
int ag_cmd_kernelspec(int argc, char **argv);
int ag_cmd_manifest(int argc, char **argv);
int ag_cmd_sandbox(int argc, char **argv);
int ag_cmd_serve(int argc, char **argv);
int ag_cmd_archive(int argc, char **argv);
int ag_cmd_mcp(int argc, char **argv);
int ag_cmd_e2b(int argc, char **argv);
int ag_cmd_audit(int argc, char **argv);

/* An option getopt_long returned: its `val`, optarg, and the command's
 * argv. A flag that takes the next word too reads argv[optind] and
 * advances the global optind. */
typedef struct ag_cmd_opt {
    int opt;
    const char *value;
    int argc;
    char **argv;
} ag_cmd_opt_t;

/* How a subcommand parses its flags: its own options and flag groups. */
typedef struct ag_cmd_spec {
    const char *name;         /* "exec": in "see 'jupyter-agent exec --help'" */
    const char *shortopts;    /* for getopt_long; 'h' is --help */
    const struct option *own; /* own long options, zero-terminated;
                                 --help ('h') is added */
    const char *usage;        /* --help: printed before the groups' help */
    const char *usage_tail;   /* ... and after it (NULL: nothing) */
    /* An own option: 0 applied; -1 a usage error in err; 1 not an option
     * of the command (getopt's '?'). `arg` is ag_cmd_parse's. */
    int (*on_opt)(void *arg, const struct ag_cmd_opt *o, err_t *err);
} ag_cmd_spec_t;

/* Run getopt_long over argv (from optind = 1) with spec's own options and
 * the rows of `groups`: a row's flag is applied by cliopt_dispatch, an own
 * option goes to spec->on_opt(arg, ...), -h/--help prints the usage, the
 * groups' help and the usage tail on stdout. Returns 0 when the flags are
 * parsed (optind is at the first operand), 1 when the help was
 * printed (the command exits 0), -1 with ERR_USAGE in err for a refused
 * value or an unknown option ("see 'jupyter-agent NAME --help'"); the
 * caller prints "jupyter-agent NAME: err" and exits ERR_USAGE. */
/* The words after a refused flag for `jupyter-agent CMD` (getopt printed
 * what it refused): "did you mean --timeout? see 'jupyter-agent exec
 * --help'" when argv[optind - 1] resembles a long option of `longopts`,
 * else only the pointer to --help. Sets err (ERR_USAGE); returns -1. For
 * the commands that run getopt_long themselves. */
int ag_cmd_refused(const char *cmd, const struct option *longopts, int argc,
                   char **argv, err_t *err);

int ag_cmd_parse(const ag_cmd_spec_t *spec, int argc, char **argv,
                 const cliopt_group_t *groups, size_t ngroups, void *arg,
                 err_t *err);

/* ag_cmd_parse with the session's flag groups (ag_session_flags) over
 * `sopts`, then `extra` (a command's own group; NULL: none): the parse of
 * exec, run, ask, kernel and mcp. */
int ag_cmd_parse_session(const ag_cmd_spec_t *spec, int argc, char **argv,
                         ag_session_opts_t *sopts, const cliopt_group_t *extra,
                         void *arg, err_t *err);

#endif
