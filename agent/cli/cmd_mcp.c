/*
 * jupyter-agent mcp: a Model Context Protocol server over sandboxed Python
 * sessions, on stdio (the default) or Streamable HTTP (--http).
 * See agent/mcp/ for the protocol, the transports and the tools.
 */
#include "agent/cli/ag_cmd.h"
#include "agent/mcp/ag_mcp_http.h"
#include "agent/mcp/ag_mcp_rpc.h"
#include "agent/mcp/ag_mcp_stdio.h"
#include "agent/session/ag_session.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/size.h"
#include "common/xalloc.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char s_usage[] =
    "usage: jupyter-agent mcp [options]\n"
    "\n"
    "Serve sandboxed Python sessions to MCP clients (Claude Code and "
    "Desktop,\n"
    "VS Code, Cursor, any Model Context Protocol host). Each MCP session "
    "gets\n"
    "its own IPython kernel in its own sandbox, started at its first "
    "call.\n"
    "Tools: python, list_files, read_file, write_file, export_notebook,\n"
    "reset, and install_packages with --packages.\n"
    "\n"
    "options:\n"
    "      --http [ADDR:]PORT  Streamable HTTP on http://ADDR:PORT/mcp\n"
    "                         instead of stdio (ADDR default 127.0.0.1)\n"
    "      --token-file FILE  clients must send 'Authorization: Bearer "
    "TOKEN'\n"
    "                         (TOKEN = FILE's first line); required when "
    "ADDR\n"
    "                         is not a loopback address\n"
    "      --allow-origin O   accept browser requests from origin O "
    "(repeatable;\n"
    "                         default: only http(s)://localhost and "
    "127.0.0.1)\n"
    "      --max-sessions N   HTTP sessions at once (default 16); more are\n"
    "                         refused with 503\n"
    "      --max-image-bytes SIZE  a PNG output over SIZE (its base64) is\n"
    "                         scaled down in the result; other images over\n"
    "                         it are described, not sent (default 256K)\n"
    "      --notebook PATH    stdio: write the session to PATH at the end;\n"
    "                         export_notebook(path) may write .ipynb files "
    "under\n"
    "                         PATH's directory (nowhere else)\n"
    "\n"
    "--timeout is the limit per python call: clients may ask for less,\n"
    "never more; a call over it is interrupted, then killed and its kernel\n"
    "restarted.\n"
    "Messages over 8 MiB are refused; read_file and write_file move at "
    "most\n"
    "4 MiB per file. The logs go to standard error "
    "(JUPYTER_AGENT_LOG=info).\n";

static const char s_usage_tail[] =
    "\n"
    "exit status: 0 the client closed the session (stdio) or a signal "
    "stopped\n"
    "the server; 2 usage; 7 I/O (the client stopped reading, the notebook\n"
    "could not be written, the HTTP port could not be bound)\n";

static volatile sig_atomic_t s_stop;

static void
s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

/* mcp's own flags. */
typedef struct mcp_args {
    ag_mcp_http_opts_t hopts;
    const char *http, *notebook;
    size_t max_image_bytes;
} mcp_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    mcp_args_t *a = arg;
    switch (o->opt) {
    case 'H':
        a->http = o->value;
        return 0;
    case 'T':
        a->hopts.token_file = o->value;
        return 0;
    case 'O':
        if (a->hopts.norigins >= AG_MCP_HTTP_MAX_ORIGINS)
            return err_set(err, ERR_USAGE, "at most %d --allow-origin flags",
                           AG_MCP_HTTP_MAX_ORIGINS);
        a->hopts.origins[a->hopts.norigins++] = o->value;
        return 0;
    case 'S': {
        char *end;
        long n = strtol(o->value, &end, 10);
        if (*end || n < 1 || n > 10000)
            return err_set(err, ERR_USAGE,
                           "--max-sessions %s: give a number from 1 to 10000",
                           o->value);
        a->hopts.max_sessions = (int)n;
        return 0;
    }
    case 'n':
        a->notebook = o->value;
        return 0;
    case 'I': {
        uint64_t n;
        if (size_parse(o->value, &n) || n < 1024 || n > ((uint64_t)1 << 30))
            return err_set(err, ERR_USAGE,
                           "--max-image-bytes %s: give a size from 1K to 1G",
                           o->value);
        a->max_image_bytes = (size_t)n;
        return 0;
    }
    default:
        return 1;
    }
}

int
ag_cmd_mcp(int argc, char **argv)
{
    static const struct option own[] = {
        {"http", required_argument, 0, 'H'},
        {"token-file", required_argument, 0, 'T'},
        {"allow-origin", required_argument, 0, 'O'},
        {"max-sessions", required_argument, 0, 'S'},
        {"max-image-bytes", required_argument, 0, 'I'},
        {"notebook", required_argument, 0, 'n'},
        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "mcp",
                                       .shortopts = "+h",
                                       .own = own,
                                       .usage = s_usage,
                                       .usage_tail = s_usage_tail,
                                       .on_opt = s_on_opt};
    ag_session_opts_t sopts;
    ag_session_opts_init(&sopts);
    sopts.outputs_data = true; /* docs/outputs.md */
    mcp_args_t a = {.hopts = {.max_sessions = 16}};
    err_t err = {0};
    int rc;
    int parsed =
        ag_cmd_parse_session(&spec, argc, argv, &sopts, NULL, &a, &err);
    if (parsed != 0) /* --help (1) ends there too, with exit 0 */
        goto usage_error;
    if (optind < argc) {
        err_set(&err, ERR_USAGE,
                "unexpected argument '%s'; see 'jupyter-agent mcp --help'",
                argv[optind]);
        goto usage_error;
    }
    if (sopts.ninstalls) {
        err_set(&err, ERR_USAGE,
                "--install is not available for mcp: clients install with "
                "the install_packages tool");
        goto usage_error;
    }
    /* Refused now, not after a whole session: never a device, FIFO or
     * link turned into a file (the write at the end checks again). */
    if (a.notebook && file_check_output(a.notebook, "--notebook", &err))
        goto usage_error;

    struct sigaction sa = {.sa_handler = s_on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    ag_mcp_config_t cfg = {.session = &sopts,
                           .notebook_path = a.notebook,
                           .max_image_bytes = a.max_image_bytes};
    if (a.http) {
        a.hopts.listen = a.http;
        rc = ag_mcp_http_run(&cfg, &a.hopts, &s_stop, &err);
        if (rc < 0 && err.code == ERR_USAGE)
            goto usage_error;
    } else {
        rc = ag_mcp_stdio_run(&cfg, STDIN_FILENO, stdout, &s_stop, &err);
    }
    if (rc < 0)
        fprintf(stderr, "jupyter-agent mcp: %s\n", err.text);
    ag_session_opts_release(&sopts);
    return rc < 0 ? (err.code ? err.code : ERR_IO) : 0;

usage_error:
    if (parsed <= 0)
        fprintf(stderr, "jupyter-agent mcp: %s\n", err.text);
    ag_session_opts_release(&sopts);
    return parsed > 0 ? 0 : ERR_USAGE;
}
