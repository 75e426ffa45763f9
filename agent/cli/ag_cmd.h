/*
 * ag_cmd: the subcommands of the jupyter-agent binary.
 *
 * Each takes argv with argv[0] = the subcommand's name and returns the
 * process exit code (see common/err.h and README "Exit codes"). Each lives
 * in its own agent/cli/cmd_NAME.c file.
 */
#ifndef AGENT_CLI_AG_CMD_H
#define AGENT_CLI_AG_CMD_H

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

#endif
