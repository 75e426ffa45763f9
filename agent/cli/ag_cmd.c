/*
 * ag_cmd: the flag loop every subcommand that takes flag groups shares.
 */
#include "agent/cli/ag_cmd.h"

#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
ag_cmd_refused(const char *cmd, const struct option *longopts, int argc,
               char **argv, err_t *err)
{
    const char *like = optind > 1 && optind <= argc
                           ? cliopt_suggest(longopts, argv[optind - 1])
                           : NULL;
    if (like)
        return err_set(err, ERR_USAGE,
                       "did you mean --%s? see 'jupyter-agent %s --help'", like,
                       cmd);
    return err_set(err, ERR_USAGE, "see 'jupyter-agent %s --help'", cmd);
}

int
ag_cmd_parse(const ag_cmd_spec_t *spec, int argc, char **argv,
             const cliopt_group_t *groups, size_t ngroups, void *arg,
             err_t *err)
{
    /* The command's own options, then --help, then the groups' rows. */
    size_t n_own = 0;
    while (spec->own[n_own].name)
        n_own++;
    struct option *own = xcalloc(n_own + 2, sizeof *own);
    memcpy(own, spec->own, n_own * sizeof *own);
    own[n_own] = (struct option){"help", no_argument, NULL, 'h'};
    struct option *longopts = cliopt_longopts(own, groups, ngroups);
    free(own);
    int rc = 0, opt;
    optind = 1;
    while (rc == 0 && (opt = getopt_long(argc, argv, spec->shortopts, longopts,
                                         NULL)) != -1) {
        int used = cliopt_dispatch(groups, ngroups, opt, optarg, err);
        if (used != 0) {
            rc = used < 0 ? -1 : 0;
        } else if (opt == 'h') {
            fputs(spec->usage, stdout);
            cliopt_help(stdout, groups, ngroups);
            if (spec->usage_tail)
                fputs(spec->usage_tail, stdout);
            rc = 1;
        } else {
            ag_cmd_opt_t o = {
                .opt = opt, .value = optarg, .argc = argc, .argv = argv};
            rc = spec->on_opt(arg, &o, err);
            /* getopt's '?' (it said what it refused) or an option nobody
             * handles; a mistyped long flag gets the one it resembles. */
            if (rc > 0 && opt == '?')
                rc = ag_cmd_refused(spec->name, longopts, argc, argv, err);
            else if (rc > 0)
                rc = err_set(err, ERR_USAGE, "see 'jupyter-agent %s --help'",
                             spec->name);
        }
    }
    free(longopts);
    return rc;
}

int
ag_cmd_parse_session(const ag_cmd_spec_t *spec, int argc, char **argv,
                     ag_session_opts_t *sopts, const cliopt_group_t *extra,
                     void *arg, err_t *err)
{
    cliopt_group_t groups[AG_SESSION_NGROUPS + 1];
    ag_session_flags(sopts, groups);
    size_t n = AG_SESSION_NGROUPS;
    if (extra)
        groups[n++] = *extra;
    int rc = ag_cmd_parse(spec, argc, argv, groups, n, arg, err);
    /* --audit: one log for the command, open before anything runs. */
    if (rc == 0 && ag_session_audit_open(sopts, err))
        rc = -1;
    return rc;
}
