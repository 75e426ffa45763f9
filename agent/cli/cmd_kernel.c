/*
 * jupyter-agent kernel: serve one connection file as a Jupyter kernel.
 * Started by Jupyter through the kernelspec (`jupyter-agent kernelspec
 * install`), never by hand in normal use.
 */
#include "agent/cli/ag_cmd.h"
#include "agent/kernel/ag_kernel.h"
#include "agent/session/ag_session.h"
#include "common/err.h"
#include "common/log.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static const char s_usage[] =
    "usage: jupyter-agent kernel -f CONNECTION_FILE [options]\n"
    "\n"
    "Serve the Jupyter kernel protocol on the sockets of CONNECTION_FILE, so\n"
    "JupyterLab, Notebook or jupyter console can use the agent as a kernel.\n"
    "Jupyter starts this through the kernelspec that\n"
    "'jupyter-agent kernelspec install' writes; options given after '--'\n"
    "there end up here.\n"
    "\n"
    "Cells: plain text is a request to the agent; a cell whose first line\n"
    "is %%python runs the rest as Python in the session; %reset starts a\n"
    "fresh session.\n"
    "\n"
    "options:\n"
    "  -f, --connection-file FILE  the connection file (required)\n"
    "      --model PROVIDER:MODEL  model for plain cells (default from\n"
    "                              JUPYTER_AGENT_MODEL or the API keys set)\n"
    "      --kernel NAME           kernelspec of the inner session (python3)\n"
    "      --timeout S             limit per Python execution (default 60;\n"
    "                              0 = none)\n"
    "      --max-output BYTES      cap on one execution's output (64M)\n"
    "      --allow-unsigned        serve a connection file with an empty "
    "key\n" AG_SESSION_FLAGS_HELP;

static ag_kernel_t *volatile s_kernel;

static void
s_on_signal(int sig)
{
    ag_kernel_t *k = s_kernel;
    if (!k)
        return;
    if (sig == SIGINT)
        ag_kernel_interrupt(k);
    else
        ag_kernel_stop(k);
}

int
ag_cmd_kernel(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"connection-file", required_argument, 0, 'f'},
        {"model", required_argument, 0, 'm'},
        {"kernel", required_argument, 0, 'k'},
        {"timeout", required_argument, 0, 't'},
        {"max-output", required_argument, 0, 'M'},
        {"allow-unsigned", no_argument, 0, 'U'},
        {"help", no_argument, 0, 'h'},
        AG_SESSION_LONGOPTS,
        {0, 0, 0, 0}};
    ag_session_opts_t sopts;
    ag_session_opts_init(&sopts);
    ag_kernel_opts_t kopts = {.inner = &sopts};
    err_t err = {0};
    int opt, status = 0;

    while ((opt = getopt_long(argc, argv, "+f:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'f':
            kopts.connection_file = optarg;
            break;
        case 'm':
            kopts.model = optarg;
            break;
        case 'k':
            sopts.kernel_name = optarg;
            break;
        case 't':
            if (ag_parse_seconds(optarg, &sopts.timeout_ms, &err))
                goto usage_error;
            break;
        case 'M':
            if (ag_parse_bytes(optarg, &sopts.max_output_bytes, &err))
                goto usage_error;
            break;
        case 'U':
            kopts.allow_unsigned = true;
            break;
        case 'h':
            fputs(s_usage, stdout);
            ag_session_opts_release(&sopts);
            return 0;
        default:
            if (ag_session_parse_flag(&sopts, opt, optarg, &err) == 0)
                break;
            if (err.text[0] == '\0')
                err_set(&err, ERR_USAGE, "see 'jupyter-agent kernel --help'");
            goto usage_error;
        }
    }
    /* Frontends append their own extra arguments (`jupyter run` passes
     * its file names, which ipykernel would run at start-up); a kernel
     * that refused to start over them would leave the frontend hanging. */
    for (int i = optind; i < argc; i++)
        log_warn("jupyter-agent kernel: ignoring extra argument '%s'", argv[i]);
    if (!kopts.connection_file) {
        err_set(&err, ERR_USAGE,
                "-f CONNECTION_FILE is required (Jupyter passes it through "
                "the kernelspec)");
        goto usage_error;
    }

    ag_kernel_t *k = ag_kernel_new(&kopts, &err);
    if (!k) {
        fprintf(stderr, "jupyter-agent kernel: %s\n", err.text);
        ag_session_opts_release(&sopts);
        return err.code ? err.code : ERR_KERNEL;
    }
    s_kernel = k;
    struct sigaction sa = {.sa_handler = s_on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    log_info("jupyter-agent kernel: serving %s", kopts.connection_file);
    status = ag_kernel_run(k);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    s_kernel = NULL;
    ag_kernel_destroy(&k);
    ag_session_opts_release(&sopts);
    return status;

usage_error:
    fprintf(stderr, "jupyter-agent kernel: %s\n", err.text);
    ag_session_opts_release(&sopts);
    return ERR_USAGE;
}
