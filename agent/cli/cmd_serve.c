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
#include "sandbox/sb_sandbox.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_usage[] =
    "usage: jupyter-agent serve [options] [POLICY FLAGS]\n"
    "       jupyter-agent serve --status | --stop | --set-net PID:RULES\n"
    "\n"
    "Keep N sandboxed kernels started and waiting, so that a new session\n"
    "(exec, run, ask) gets one in milliseconds instead of a second or more.\n"
    "Each kernel serves exactly one session and is destroyed after it; the\n"
    "pool refills in the background. Sessions whose kernel or sandbox\n"
    "policy differs from the pool's start a cold kernel as before.\n"
    "\n"
    "options:\n"
    "      --pool N           kernels kept ready (default 4); misses grow\n"
    "                         the pool up to --pool-max\n"
    "      --pool-max N       the most kernels the pool grows to on misses\n"
    "                         (default 4 x --pool, at most what a quarter\n"
    "                         of the available memory holds)\n"
    "      --preload CODE     Python run in each kernel at warm-up, outside\n"
    "                         the user namespace (e.g. 'import pandas, "
    "matplotlib')\n"
    "      --kernel NAME      kernelspec to pool (default python3; must be "
    "ipykernel)\n"
    "      --factory          fork the kernels from one process that imported\n"
    "                         --preload once (pages shared: far less memory\n"
    "                         and CPU per kernel); each still runs in its own\n"
    "                         box. The default for the python3 kernel\n"
    "                         without --seccomp-audit\n"
    "      --no-factory       start a fresh interpreter per kernel\n"
    "      --warmup-timeout S abandon a warm-up not ready after S seconds\n"
    "                         and retry it (default 60; after 3 such in a\n"
    "                         row the pool pauses until a session misses)\n"
    "      --socket PATH      unix socket (default "
    "$XDG_RUNTIME_DIR/jupyter-agent/\n"
    "                         serve.sock or ~/.cache/jupyter-agent/serve.sock;"
    "\n"
    "                         $JUPYTER_AGENT_SERVE_SOCKET overrides both)\n"
    "      --status           print the running server's counters (hits,\n"
    "                         misses: waited and cold_misses, size and\n"
    "                         max_size of the pool) and warm-up times (last,\n"
    "                         p50 of the last 32, max) as JSON\n"
    "      --set-net PID:RULES  replace the --allow-net rules of the session\n"
    "                         whose box has pid PID (--status lists them "
    "under\n"
    "                         \"network\"): its next connections are judged "
    "by\n"
    "                         RULES (a comma list; empty for none)\n"
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

/* serve's own flags. */
typedef struct serve_args {
    kb_serve_opts_t o;
    const char *query;   /* --status ("stats") or --stop ("stop"), or NULL */
    const char *set_net; /* --set-net PID:RULES, or NULL */
    int factory;         /* --factory 1, --no-factory 0, neither -1 */
} serve_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *opt, err_t *err)
{
    serve_args_t *a = arg;
    char *end;
    long n;
    switch (opt->opt) {
    case 'p':
        n = strtol(opt->value, &end, 10);
        if (*end || n < 1 || n > 1000)
            return err_set(err, ERR_USAGE, "--pool takes 1..1000, not '%s'",
                           opt->value);
        a->o.pool_size = (unsigned)n;
        return 0;
    case 'P':
        a->o.preload = opt->value;
        return 0;
    case 'W':
        n = strtol(opt->value, &end, 10);
        if (*end || n < 1 || n > 3600)
            return err_set(err, ERR_USAGE,
                           "--warmup-timeout takes 1..3600 seconds, not '%s'",
                           opt->value);
        a->o.warmup_timeout_ms = (int)n * 1000;
        return 0;
    case 'k':
        a->o.kernel_name = opt->value;
        return 0;
    case 's':
        a->o.socket_path = opt->value;
        return 0;
    case 'S':
        a->query = "stats";
        return 0;
    case 'X':
        a->query = "stop";
        return 0;
    case 'R':
        a->query = "network";
        a->set_net = opt->value;
        return 0;
    case 'F':
        a->factory = 1;
        return 0;
    case 'N':
        a->factory = 0;
        return 0;
    case 'M':
        n = strtol(opt->value, &end, 10);
        if (*end || n < 1 || n > 1000)
            return err_set(err, ERR_USAGE, "--pool-max takes 1..1000, not '%s'",
                           opt->value);
        a->o.pool_max = (unsigned)n;
        return 0;
    default:
        return 1;
    }
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
        {"set-net", required_argument, 0, 'R'},
        {"factory", no_argument, 0, 'F'},
        {"no-factory", no_argument, 0, 'N'},
        {"pool-max", required_argument, 0, 'M'},
        {"warmup-timeout", required_argument, 0, 'W'},
        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "serve",
                                       .shortopts = "h",
                                       .own = own,
                                       .usage = s_usage,
                                       .on_opt = s_on_opt};
    serve_args_t a = {.factory = -1};
    kb_serve_opts_t *o = &a.o;
    sb_policy_t policy;
    sb_policy_init_default(&policy);
    err_t err = {0};
    int status = 0;
    cliopt_group_t groups[] = {sb_policy_flags(&policy)};
    int parsed = ag_cmd_parse(&spec, argc, argv, groups, 1, &a, &err);
    if (parsed != 0) /* --help (1) ends there too, with exit 0 */
        goto usage_error;
    if (optind < argc) {
        err_set(&err, ERR_USAGE, "unexpected argument '%s'", argv[optind]);
        goto usage_error;
    }
    if (a.factory < 0) /* the default: forked kernels, where they work */
        o->factory = !policy.seccomp_audit &&
                     !sb_engine_nesting_gap(policy.engine) &&
                     (!o->kernel_name || !strcmp(o->kernel_name, "python3"));
    else
        o->factory = a.factory == 1;
    if (o->pool_max && o->pool_max < (o->pool_size ? o->pool_size : 4)) {
        err_set(&err, ERR_USAGE, "--pool-max %u is below --pool %u; raise it",
                o->pool_max, o->pool_size ? o->pool_size : 4);
        goto usage_error;
    }
    if (o->factory && sb_engine_nesting_gap(policy.engine)) {
        err_set(&err, ERR_USAGE, "%s", sb_engine_nesting_gap(policy.engine));
        goto usage_error;
    }
    if (policy.seccomp_audit && o->factory) {
        err_set(&err, ERR_USAGE,
                "--seccomp-audit does not work with --factory (forked "
                "kernels install the enforcing filter themselves); drop one");
        goto usage_error;
    }
    json_t *req = a.query ? json_pack("{s:s}", "op", a.query) : NULL;
    if (a.set_net) { /* PID:RULES, RULES as --allow-net checks them */
        char *end;
        long pid = strtol(a.set_net, &end, 10);
        if (pid <= 0 || *end != ':' || sb_net_rules_check(end + 1, &err) < 0) {
            if (!err.code)
                err_set(&err, ERR_USAGE,
                        "--set-net takes PID:RULES (the pid from --status), "
                        "not '%s'",
                        a.set_net);
            json_decref(req);
            goto usage_error;
        }
        json_object_set_new(req, "pid", json_integer(pid));
        json_object_set_new(req, "allow_net", json_string(end + 1));
    }
    if (req) {
        json_t *reply = kb_serve_call(o->socket_path, req, &err);
        if (!reply) {
            fprintf(stderr, "jupyter-agent serve: %s\n", err.text);
            sb_policy_release(&policy);
            return err.code ? err.code : ERR_KERNEL;
        }
        json_object_del(reply, "ok");
        json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_t *left = json_object_get(reply, "sessions_left");
        if (!strcmp(a.query, "stop") && json_integer_value(left) > 0)
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
    o->policy = &policy;
    char *what = xasprintf(
        "%u x %s, sandboxed%s%s%s", o->pool_size ? o->pool_size : 4,
        o->kernel_name ? o->kernel_name : "python3",
        o->factory ? ", forked from a factory" : "",
        o->preload ? ", preload: " : "", o->preload ? o->preload : "");
    o->on_listening = s_listening;
    o->arg = what;
    if (kb_serve_run(o, &err)) {
        fprintf(stderr, "jupyter-agent serve: %s\n", err.text);
        status = err.code ? err.code : ERR_IO;
    }
    free(what);
    sb_policy_release(&policy);
    return status;

usage_error:
    if (parsed <= 0)
        fprintf(stderr, "jupyter-agent serve: %s\n", err.text);
    sb_policy_release(&policy);
    return parsed > 0 ? 0 : ERR_USAGE;
}
