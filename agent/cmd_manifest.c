/* Placeholder until the subcommand lands; replaced by its real file. */
#include "agent/ag_cmd.h"
#include "common/err.h"

#include <stdio.h>

int
ag_cmd_manifest(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "jupyter-agent: 'manifest' is not built yet\n");
    return ERR_USAGE;
}
