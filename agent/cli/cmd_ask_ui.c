/*
 * cmd_ask_ui: `jupyter-agent ask` on the terminal while the model works:
 * the streamed answer, each cell as it runs with its outputs (images named,
 * not drawn), a live elapsed-time line on a TTY, tool results and notices.
 * --quiet keeps only the answers.
 */
#include "agent/cli/cmd_ask_impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_clear_tick(ask_ui_t *ui)
{
    if (ui->ticking) {
        fputs("\r\033[K", stdout);
        fflush(stdout);
        ui->ticking = false;
    }
}

static void
s_put(ask_ui_t *ui, const char *text, size_t len)
{
    if (!len)
        return;
    s_clear_tick(ui);
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    ui->at_bol = text[len - 1] == '\n';
}

static void
s_newline(ask_ui_t *ui)
{
    if (!ui->at_bol)
        s_put(ui, "\n", 1);
}

static void
s_on_text(const char *text, size_t len, void *arg)
{
    ask_ui_t *ui = arg;
    if (ui->quiet) {
        buf_append(&ui->turn_text, text, len);
        return;
    }
    if (ui->after_tool && len) {
        s_newline(ui);
        s_put(ui, "\n", 1);
        ui->after_tool = false;
    }
    s_put(ui, text, len);
}

static void
s_on_turn(const char *text, size_t ncalls, void *arg)
{
    ask_ui_t *ui = arg;
    (void)text;
    if (ui->quiet) {
        if (ncalls == 0)
            s_put(ui, ui->turn_text.data ? ui->turn_text.data : "",
                  ui->turn_text.len);
        buf_reset(&ui->turn_text);
    }
    s_newline(ui);
}

static void
s_on_tool_start(const char *name, const char *code, void *arg)
{
    ask_ui_t *ui = arg;
    ui->cells++;
    if (ui->quiet)
        return;
    s_newline(ui);
    putchar('\n');
    ui->after_tool = true;
    printf("%s── %s [%d] ──────────────────────────────────────────%s\n",
           cmd_ask_c(ui, "\033[1;36m"), name, ui->cells,
           cmd_ask_c(ui, "\033[0m"));
    const char *p = strcmp(code, "{}") == 0 ? "" : code;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        printf("%s│%s %.*s\n", cmd_ask_c(ui, "\033[36m"),
               cmd_ask_c(ui, "\033[0m"), (int)n, p);
        p += n + (nl ? 1 : 0);
    }
    fflush(stdout);
    ui->at_bol = true;
    ui->last_tick_s = 0;
}

static void
s_on_output(json_t *output, void *arg)
{
    ask_ui_t *ui = arg;
    if (ui->quiet)
        return;
    s_clear_tick(ui);
    json_t *data = json_object_get(output, "data");
    const char *mimes[] = {"image/png", "image/jpeg"};
    for (size_t i = 0; i < 2; i++) {
        const char *b64 = json_string_value(json_object_get(data, mimes[i]));
        if (!b64)
            continue;
        size_t len = 0;
        unsigned char *bin = ag_base64_decode(b64, &len);
        unsigned w = 0, h = 0;
        if (bin && ag_png_size(bin, len, &w, &h) == 0)
            printf("%s[image %ux%u: in the notebook]%s\n",
                   cmd_ask_c(ui, "\033[35m"), w, h, cmd_ask_c(ui, "\033[0m"));
        else
            printf("%s[%s image: in the notebook]%s\n",
                   cmd_ask_c(ui, "\033[35m"), mimes[i],
                   cmd_ask_c(ui, "\033[0m"));
        free(bin);
        fflush(stdout);
        ui->at_bol = true;
        return;
    }
    ag_render_output(&ui->render, output);
    const char *type =
        json_string_value(json_object_get(output, "output_type"));
    const char *text = json_string_value(json_object_get(output, "text"));
    if (type && strcmp(type, "stream") == 0 && text && *text)
        ui->at_bol = text[strlen(text) - 1] == '\n';
    else
        ui->at_bol = true;
}

static void
s_on_wait(int64_t elapsed_ms, void *arg)
{
    ask_ui_t *ui = arg;
    if (!ui->tty || ui->quiet || elapsed_ms < 2000 || !ui->at_bol)
        return;
    int64_t s = elapsed_ms / 1000;
    if (s == ui->last_tick_s && ui->ticking)
        return;
    ui->last_tick_s = s;
    printf("\r%s… running %lld s (Ctrl-C stops)%s\033[K",
           cmd_ask_c(ui, "\033[2m"), (long long)s, cmd_ask_c(ui, "\033[0m"));
    fflush(stdout);
    ui->ticking = true;
}

static void
s_on_tool_end(const char *name, const ag_tool_result_t *res, void *arg)
{
    ask_ui_t *ui = arg;
    if (ui->quiet)
        return;
    s_clear_tick(ui);
    s_newline(ui);
    if (!res->cell_source && res->is_error) {
        printf("%s%s: %s%s\n", cmd_ask_c(ui, "\033[33m"), name, res->text,
               cmd_ask_c(ui, "\033[0m"));
    } else if (strcmp(name, "python") != 0 && res->text) {
        fputs(res->text, stdout);
        s_newline(ui);
    }
    if (res->duration_ms >= 2000)
        printf("%s(%.1f s)%s\n", cmd_ask_c(ui, "\033[2m"),
               res->duration_ms / 1000.0, cmd_ask_c(ui, "\033[0m"));
    if (res->status)
        printf("%s[%s]%s\n", cmd_ask_c(ui, "\033[33m"), res->status,
               cmd_ask_c(ui, "\033[0m"));
    fflush(stdout);
    ui->at_bol = true;
}

static void
s_on_notice(const char *text, void *arg)
{
    ask_ui_t *ui = arg;
    s_clear_tick(ui);
    s_newline(ui);
    fprintf(stderr, "%sjupyter-agent ask: %s%s\n", cmd_ask_c(ui, "\033[33m"),
            text, cmd_ask_c(ui, "\033[0m"));
}

void
cmd_ask_ui_end(ask_ui_t *ui)
{
    s_clear_tick(ui);
    s_newline(ui);
}

ag_loop_ui_t
cmd_ask_ui_hooks(ask_ui_t *ui)
{
    return (ag_loop_ui_t){.on_text = s_on_text,
                          .on_turn = s_on_turn,
                          .on_tool_start = s_on_tool_start,
                          .on_output = s_on_output,
                          .on_wait = s_on_wait,
                          .on_tool_end = s_on_tool_end,
                          .on_notice = s_on_notice,
                          .arg = ui};
}
