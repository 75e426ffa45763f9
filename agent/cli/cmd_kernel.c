/*
 * jupyter-agent kernel: serve one connection file as a Jupyter kernel.
 * Started by Jupyter through the kernelspec (`jupyter-agent kernelspec
 * install`), never by hand in normal use.
 */
#include "agent/cli/ag_cmd.h"
#include "agent/kernel/ag_kernel.h"
#include "agent/kernel/ag_loop_kernel.h"
#include "agent/session/ag_session.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "common/log.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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
    "      --allow-unsigned        serve a connection file with an empty "
    "key\n";

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

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    (void)err;
    ag_kernel_opts_t *kopts = arg;
    switch (o->opt) {
    case 'f':
        kopts->connection_file = o->value;
        return 0;
    case 'm':
        kopts->model = o->value;
        return 0;
    case 'U':
        kopts->allow_unsigned = true;
        return 0;
    default:
        return 1;
    }
}

int
ag_cmd_kernel(int argc, char **argv)
{
    static const struct option own[] = {
        {"connection-file", required_argument, 0, 'f'},
        {"model", required_argument, 0, 'm'},
        {"allow-unsigned", no_argument, 0, 'U'},
        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "kernel",
                                       .shortopts = "+f:h",
                                       .own = own,
                                       .usage = s_usage,
                                       .on_opt = s_on_opt};
    ag_session_opts_t sopts;
    ag_session_opts_init(&sopts);
    sopts.outputs_data = true; /* docs/outputs.md */
    ag_kernel_opts_t kopts = {.inner = &sopts, .ask = ag_loop_kernel_ask};
    err_t err = {0};
    int status = 0;
    int parsed =
        ag_cmd_parse_session(&spec, argc, argv, &sopts, NULL, &kopts, &err);
    if (parsed != 0) /* --help (1) ends there too, with exit 0 */
        goto usage_error;
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
    if (parsed <= 0)
        fprintf(stderr, "jupyter-agent kernel: %s\n", err.text);
    ag_session_opts_release(&sopts);
    return parsed > 0 ? 0 : ERR_USAGE;
}
