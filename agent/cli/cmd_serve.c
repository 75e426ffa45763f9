/*
 * jupyter-agent serve: keep a pool of warm sandboxed kernels between
 * commands. exec (and every other session-starting command) takes one
 * when a server answers, and starts a cold kernel otherwise.
 */
#include "agent/cli/ag_cmd.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_serve.h"
#include "sandbox/sb_policy.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_usage[] =
    "usage: jupyter-agent serve [options] [POLICY FLAGS]\n"
    "       jupyter-agent serve --status | --stop\n"
    "\n"
    "Keep N sandboxed kernels started and waiting, so that a new session\n"
    "(exec, run, ask) gets one in milliseconds instead of a second or more.\n"
    "Each kernel serves exactly one session and is destroyed after it; the\n"
    "pool refills in the background. Sessions whose kernel or sandbox\n"
    "policy differs from the pool's start a cold kernel as before.\n"
    "\n"
    "options:\n"
    "      --pool N           kernels kept ready (default 4)\n"
    "      --preload CODE     Python run in each kernel at warm-up, outside\n"
    "                         the user namespace (e.g. 'import pandas, "
    "matplotlib')\n"
    "      --kernel NAME      kernelspec to pool (default python3; must be "
    "ipykernel)\n"
    "      --factory          fork the kernels from one process that imported\n"
    "                         --preload once (pages shared: far less memory\n"
    "                         per session); each still runs in its own box\n"
    "      --warmup-timeout S abandon a warm-up not ready after S seconds\n"
    "                         and retry it (default 60; after 3 such in a\n"
    "                         row the pool pauses until a session misses)\n"
    "      --socket PATH      unix socket (default "
    "$XDG_RUNTIME_DIR/jupyter-agent/\n"
    "                         serve.sock or ~/.cache/jupyter-agent/serve.sock;"
    "\n"
    "                         $JUPYTER_AGENT_SERVE_SOCKET overrides both)\n"
    "      --status           print the running server's counters and\n"
    "                         warm-up times (last, p50 of the last 32, max)\n"
    "                         as JSON\n"
    "      --stop             ask the running server to exit: it stops\n"
    "                         handing out kernels at once, lets sessions in\n"
    "                         use finish, and says how many it left running\n"
    "\n"
    "The pool's sandbox is set by the policy flags below; a session gets a\n"
    "warm kernel only when it asks for the same policy.\n";

static void
s_listening(const char *path, void *arg)
{
    const char *what = arg;
    printf("jupyter-agent serve: listening on %s (%s)\n", path, what);
    fflush(stdout);
}

int
ag_cmd_serve(int argc, char **argv)
{
    static const struct option own[] = {
        {"pool", required_argument, 0, 'p'},
        {"preload", required_argument, 0, 'P'},
        {"kernel", required_argument, 0, 'k'},
        {"socket", required_argument, 0, 's'},
        {"status", no_argument, 0, 'S'},
        {"stop", no_argument, 0, 'X'},
        {"factory", no_argument, 0, 'F'},
        {"warmup-timeout", required_argument, 0, 'W'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    kb_serve_opts_t o = {0};
    sb_policy_t policy;
    sb_policy_init_default(&policy);
    err_t err = {0};
    const char *query = NULL;
    int status = 0;
    cliopt_group_t groups[] = {sb_policy_flags(&policy)};
    struct option *longopts = cliopt_longopts(own, groups, 1);
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int used = cliopt_dispatch(groups, 1, opt, optarg, &err);
        if (used < 0)
            goto usage_error;
        if (used > 0)
            continue;
        switch (opt) {
        case 'p': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 1000) {
                err_set(&err, ERR_USAGE, "--pool takes 1..1000, not '%s'",
                        optarg);
                goto usage_error;
            }
            o.pool_size = (unsigned)n;
            break;
        }
        case 'P':
            o.preload = optarg;
            break;
        case 'W': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 3600) {
                err_set(&err, ERR_USAGE,
                        "--warmup-timeout takes 1..3600 seconds, not '%s'",
                        optarg);
                goto usage_error;
            }
            o.warmup_timeout_ms = (int)n * 1000;
            break;
        }
        case 'k':
            o.kernel_name = optarg;
            break;
        case 's':
            o.socket_path = optarg;
            break;
        case 'S':
            query = "stats";
            break;
        case 'X':
            query = "stop";
            break;
        case 'F':
            o.factory = true;
            break;
        case 'h':
            fputs(s_usage, stdout);
            cliopt_help(stdout, groups, 1);
            sb_policy_release(&policy);
            free(longopts);
            return 0;
        default:
            err_set(&err, ERR_USAGE, "see 'jupyter-agent serve --help'");
            goto usage_error;
        }
    }
    if (optind < argc) {
        err_set(&err, ERR_USAGE, "unexpected argument '%s'", argv[optind]);
        goto usage_error;
    }
    free(longopts);
    longopts = NULL;
    if (policy.seccomp_audit && o.factory) {
        err_set(&err, ERR_USAGE,
                "--seccomp-audit does not work with --factory (forked "
                "kernels install the enforcing filter themselves); drop one");
        goto usage_error;
    }
    if (query) {
        json_t *reply = kb_serve_request(o.socket_path, query, &err);
        if (!reply) {
            fprintf(stderr, "jupyter-agent serve: %s\n", err.text);
            sb_policy_release(&policy);
            return err.code ? err.code : ERR_KERNEL;
        }
        json_object_del(reply, "ok");
        json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_t *left = json_object_get(reply, "sessions_left");
        if (!strcmp(query, "stop") && json_integer_value(left) > 0)
            fprintf(
                stderr,
                "jupyter-agent serve: stopped handing out kernels; "
                "%" JSON_INTEGER_FORMAT
                " session(s) in use keep running, and the server exits when "
                "they end\n",
                json_integer_value(left));
        json_decref(reply);
        sb_policy_release(&policy);
        return 0;
    }
    o.policy = &policy;
    char *what =
        xasprintf("%u x %s, sandboxed%s%s%s", o.pool_size ? o.pool_size : 4,
                  o.kernel_name ? o.kernel_name : "python3",
                  o.factory ? ", forked from a factory" : "",
                  o.preload ? ", preload: " : "", o.preload ? o.preload : "");
    o.on_listening = s_listening;
    o.arg = what;
    if (kb_serve_run(&o, &err)) {
        fprintf(stderr, "jupyter-agent serve: %s\n", err.text);
        status = err.code ? err.code : ERR_IO;
    }
    free(what);
    sb_policy_release(&policy);
    return status;

usage_error:
    fprintf(stderr, "jupyter-agent serve: %s\n", err.text);
    free(longopts);
    sb_policy_release(&policy);
    return ERR_USAGE;
}
