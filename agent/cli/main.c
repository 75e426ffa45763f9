/*
 * jupyter-agent: a sandboxed code-interpreter agent that speaks Jupyter.
 * main() only dispatches to a subcommand; see agent/cli/cmd_*.c.
 */
#include "agent/cli/ag_cmd.h"
#include "common/err.h"
#include "common/log.h"
#include "common/version.h"
#include "sandbox/sb_egress_proxy.h"

#include <stdio.h>
#include <string.h>

struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage; /* one line for the overview */
};

static const struct subcommand s_commands[] = {
    {"exec", ag_cmd_exec,
     "exec [-c CODE | FILE] [--file F]... [--json] [--timeout S]"},
    {"run", ag_cmd_run, "run NOTEBOOK.ipynb [-o OUT.ipynb] [--allow-errors]"},
    {"ask", ag_cmd_ask, "ask \"QUESTION\" [--file F]... [--model P:M] [-o S]"},
    {"kernel", ag_cmd_kernel, "kernel -f CONNECTION_FILE"},
    {"kernelspec", ag_cmd_kernelspec, "kernelspec install|uninstall"},
    {"manifest", ag_cmd_manifest, "manifest keygen|sign|verify"},
    {"sandbox", ag_cmd_sandbox, "sandbox [POLICY FLAGS] -- CMD [ARGS]"},
    {"serve", ag_cmd_serve, "serve [--pool N] [--factory] [--preload CODE]"},
    {"archive", ag_cmd_archive, "archive pack|verify|rerun|show REPORT.zip"},
    {"mcp", ag_cmd_mcp, "mcp [--http [ADDR:]PORT] [--notebook PATH]"},
    {"e2b", ag_cmd_e2b, "e2b [--listen [ADDR:]PORT] [--api-key-file F]"},
};

static void
s_usage(FILE *out)
{
    fprintf(out, "usage: jupyter-agent <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        fprintf(out, "  jupyter-agent %s\n", s_commands[i].usage);
    fprintf(out,
            "\n'jupyter-agent <command> --help' describes a command.\n"
            "\nexit codes:\n"
            "  0    success\n"
            "  1    the code raised an error (or a recorded cell did)\n"
            "  2    usage error: bad flags, arguments or input files\n"
            "  3    kernel failure: it would not start, died, or misbehaved\n"
            "  4    sandbox failure: the sandbox could not be set up\n"
            "  5    LLM provider failure: auth, network, rate limits\n"
            "  6    timeout: an execution exceeded its limit\n"
            "  7    I/O failure writing or reading our own files\n"
            "  8    verification failure: signature or hash mismatch\n"
            "  9    archive rerun: outputs were not reproduced\n"
            "  130  interrupted (Ctrl-C); partial results were still saved\n");
}

int
main(int argc, char **argv)
{
    log_init_from_env();
    if (argc < 2) {
        s_usage(stderr);
        return ERR_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, SB_EGRESS_PROXY_CMD) == 0) /* --allow-net's proxy */
        return sb_egress_proxy_main(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        strcmp(cmd, "help") == 0) {
        s_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("jupyter-agent %s\n", JUPYTER_AGENT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (strcmp(cmd, s_commands[i].name) == 0)
            return s_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr,
            "jupyter-agent: unknown command '%s'; "
            "run 'jupyter-agent --help' for the list\n",
            cmd);
    return ERR_USAGE;
}
