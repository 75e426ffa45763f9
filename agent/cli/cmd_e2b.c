/*
 * jupyter-agent e2b: a local server that the official E2B SDKs drive
 * unchanged (sandboxes, code interpreter, files). See agent/e2b/ and
 * docs/e2b.md.
 */
#include "agent/cli/ag_cmd.h"
#include "agent/e2b/e2b_server.h"
#include "agent/session/ag_session.h"
#include "common/err.h"
#include "common/size.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_usage[] =
    "usage: jupyter-agent e2b [options]\n"
    "\n"
    "Serve E2B's API locally: programs written for the E2B SDKs (e2b,\n"
    "@e2b/code-interpreter, e2b_code_interpreter) run unchanged with\n"
    "  E2B_API_URL=http://127.0.0.1:3000 "
    "E2B_SANDBOX_URL=http://127.0.0.1:3000\n"
    "  E2B_API_KEY=e2b_<hex>\n"
    "Each E2B sandbox is a sandboxed IPython kernel with the policy flags\n"
    "below; its working directory /home/user is its /mnt/data. See\n"
    "docs/e2b.md for what is supported.\n"
    "\n"
    "options:\n"
    "      --listen [ADDR:]PORT  where to listen (default 127.0.0.1:3000)\n"
    "      --api-key-file FILE   clients must send X-API-KEY = FILE's first\n"
    "                            line (e2b_ and hex digits); required when\n"
    "                            ADDR is not a loopback address; without "
    "it\n"
    "                            any well-formed key is accepted and each "
    "key\n"
    "                            sees only its own sandboxes\n"
    "      --max-sandboxes N     sandboxes at once (default 16); more are\n"
    "                            refused with 429\n"
    "      --pool N              keep N warm kernels of our own (a private\n"
    "                            'serve'); without it a running 'serve' "
    "with\n"
    "                            the same policy is used\n"
    "      --pause-disk SIZE     what paused sandboxes may hold on disk at\n"
    "                            once (images and files; e.g. 4G); a pause\n"
    "                            past it is refused (default: no cap)\n"
    "      --debug-ports         also listen on 127.0.0.1:49999 and :49983 "
    "for\n"
    "                            E2B_DEBUG=true clients (one sandbox, no\n"
    "                            tokens)\n";

static const char s_usage_tail[] =
    "\n"
    "exit status: 0 a signal stopped the server; 2 usage; 7 a port could\n"
    "not be bound\n";

static volatile sig_atomic_t s_stop;

static void
s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

static int
s_number(const char *flag, const char *v, long lo, long hi, long *out,
         err_t *err)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < lo || n > hi)
        return err_set(err, ERR_USAGE, "%s %s: give a number from %ld to %ld",
                       flag, v, lo, hi);
    *out = n;
    return 0;
}

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    e2b_server_opts_t *a = arg;
    long n;
    switch (o->opt) {
    case 'L':
        a->listen = o->value;
        return 0;
    case 'K':
        a->api_key_file = o->value;
        return 0;
    case 'S':
        if (s_number("--max-sandboxes", o->value, 1, 10000, &n, err) < 0)
            return -1;
        a->max_sandboxes = (int)n;
        return 0;
    case 'P':
        if (s_number("--pool", o->value, 0, 1000, &n, err) < 0)
            return -1;
        a->pool = (unsigned)n;
        return 0;
    case 'D':
        a->debug_ports = true;
        return 0;
    case 'Z':
        if (size_parse(o->value, &a->pause_disk_bytes) < 0 ||
            a->pause_disk_bytes == 0)
            return err_set(err, ERR_USAGE,
                           "--pause-disk '%s': a size such as 512M or 4G",
                           o->value);
        return 0;
    default:
        return 1;
    }
}

static void
s_listening(const char *url, void *arg)
{
    const e2b_server_opts_t *o = arg;
    fprintf(stderr,
            "jupyter-agent e2b: listening on %s%s\n"
            "  E2B_API_URL=%s E2B_SANDBOX_URL=%s E2B_API_KEY=%s\n",
            url,
            o->debug_ports ? " (and 127.0.0.1:49999, :49983 for E2B_DEBUG)"
                           : "",
            url, url,
            o->api_key_file ? "<the key in --api-key-file>" : "e2b_<any hex>");
    fflush(stderr);
}

int
ag_cmd_e2b(int argc, char **argv)
{
    static const struct option own[] = {
        {"listen", required_argument, 0, 'L'},
        {"api-key-file", required_argument, 0, 'K'},
        {"max-sandboxes", required_argument, 0, 'S'},
        {"pool", required_argument, 0, 'P'},
        {"debug-ports", no_argument, 0, 'D'},
        {"pause-disk", required_argument, 0, 'Z'},
        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "e2b",
                                       .shortopts = "+h",
                                       .own = own,
                                       .usage = s_usage,
                                       .usage_tail = s_usage_tail,
                                       .on_opt = s_on_opt};
    ag_session_opts_t sopts;
    ag_session_opts_init(&sopts);
    sopts.outputs_data = true; /* a result's chart and data: docs/outputs.md */
    e2b_server_opts_t a = {.session = &sopts, .max_sandboxes = 16};
    a.on_listening = s_listening;
    a.arg = &a;
    err_t err = {0};
    int rc;
    int parsed =
        ag_cmd_parse_session(&spec, argc, argv, &sopts, NULL, &a, &err);
    if (parsed != 0)
        goto usage_error;
    if (optind < argc) {
        err_set(&err, ERR_USAGE,
                "unexpected argument '%s'; see 'jupyter-agent e2b --help'",
                argv[optind]);
        goto usage_error;
    }
    if (sopts.no_sandbox) {
        err_set(&err, ERR_USAGE,
                "--no-sandbox: E2B sandboxes are always boxes here");
        goto usage_error;
    }
    if (sopts.gateway_url) {
        err_set(&err, ERR_USAGE,
                "--gateway: E2B sandboxes run here, each in its own box "
                "(files and commands need the box)");
        goto usage_error;
    }

    struct sigaction sa = {.sa_handler = s_on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    rc = e2b_server_run(&a, &s_stop, &err);
    if (rc < 0 && err.code == ERR_USAGE)
        goto usage_error;
    if (rc < 0)
        fprintf(stderr, "jupyter-agent e2b: %s\n", err.text);
    ag_session_opts_release(&sopts);
    return rc < 0 ? (err.code ? err.code : ERR_IO) : 0;

usage_error:
    if (parsed <= 0)
        fprintf(stderr, "jupyter-agent e2b: %s\n", err.text);
    ag_session_opts_release(&sopts);
    return parsed > 0 ? 0 : ERR_USAGE;
}
