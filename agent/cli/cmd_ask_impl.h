/*
 * cmd_ask_impl: what the files of `jupyter-agent ask` share (cmd_ask.c
 * parses, runs the session and saves it; cmd_ask_ui.c shows it on the
 * terminal while it runs). Private to agent/cli.
 */
#ifndef AGENT_CLI_CMD_ASK_IMPL_H
#define AGENT_CLI_CMD_ASK_IMPL_H

#include "agent/loop/ag_loop.h"
#include "agent/loop/ag_render.h"
#include "common/buf.h"

#include <stdbool.h>
#include <stdint.h>

/* The terminal while one question is answered. */
typedef struct ask_ui {
    bool color;          /* ANSI colours (stdout is a TTY, NO_COLOR unset) */
    bool tty;            /* stdout is a TTY: live elapsed-time indicator */
    bool quiet;          /* --quiet: answers only */
    bool at_bol;         /* stdout is at the start of a line */
    bool ticking;        /* the elapsed-time line is on screen */
    bool after_tool;     /* a tool ran since the last assistant text */
    int64_t last_tick_s; /* seconds shown by the indicator */
    int cells;           /* cells shown so far */
    ag_render_t render;  /* output rendering */
    buf_t turn_text;     /* text of the turn being streamed (quiet mode) */
} ask_ui_t;

/* `code` (an ANSI escape) when colours are on, else "". */
static inline const char *
cmd_ask_c(const ask_ui_t *ui, const char *code)
{
    return ui->color ? code : "";
}

/* The loop's callbacks, drawing on `ui` (borrowed for the loop's run). */
ag_loop_ui_t cmd_ask_ui_hooks(ask_ui_t *ui);
/* After the loop: the elapsed-time line gone, stdout at a line's start. */
void cmd_ask_ui_end(ask_ui_t *ui);

#endif
