/*
 * cmd_archive_impl: what the files of `jupyter-agent archive` share
 * (cmd_archive.c parses and runs pack, verify and show; cmd_archive_rerun.c
 * runs rerun). Private to agent/cli.
 */
#ifndef AGENT_CLI_CMD_ARCHIVE_IMPL_H
#define AGENT_CLI_CMD_ARCHIVE_IMPL_H

#include "agent/session/ag_archive.h"
#include "common/err.h"
#include "sandbox/sb_policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* How long the environment probe (pack) and its re-check (rerun) may take. */
#define PROBE_TIMEOUT_MS 120000

typedef struct archive_args {
    const char *verb;
    const char *target; /* NOTEBOOK (pack) or REPORT.zip */
    const char *out;
    char **inputs; /* owned NULL-terminated list of borrowed strings */
    size_t ninputs;
    const char *key, *outputs, *packages;
    char **trusts; /* idem */
    size_t ntrusts;
    bool force, no_probe, allow_unsigned;
    double tolerance;
    int timeout_ms;
    sb_policy_t policy; /* owned: rerun's ceiling (policy flags, defaults) */
} archive_args_t;

/* Print `s` line by line after `prefix`, each line escaped (ESC_NAME). */
void cmd_archive_put_lines(FILE *f, const char *prefix, const char *s);

/* Open a->target with the trusted keys of a (--trust, the defaults),
 * extracting into extract_dirfd (-1: none). NULL with err naming the
 * file. Close it with cmd_archive_close. */
ag_archive_t *cmd_archive_open(const archive_args_t *a, int extract_dirfd,
                               err_t *err);
void cmd_archive_close(ag_archive_t **ar);

/* Who signed ar, escaped, for a message; owned by the caller. */
char *cmd_archive_signer(const ag_archive_t *ar);

/* `archive rerun`: 0 every cell reproduced, else an exit code (err set). */
int cmd_archive_rerun(const archive_args_t *a, err_t *err);

#endif
