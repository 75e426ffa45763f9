/* The tools an MCP box offers: the table, tools/list and tools/call, and
 * a box's new and destroy (see ag_mcp_tools_impl.h for the other files). */
#include "agent/mcp/ag_mcp_tools_impl.h"

#include "common/check.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* One tool. To add one: a function (ag_mcp_tool_fn), its schemas in
 * agent/mcp/ag_mcp_tool_NAME.json (declared in ag_mcp_tools_impl.h) and a
 * row here. */
typedef struct s_tool {
    const char *name;
    const char *description; /* NULL: ag_tools' own */
    const char *schemas;     /* ag_mcp_tool_NAME.json; NULL: ag_tools' own */
    ag_mcp_tool_fn fn;
    const char *remote_description; /* through a gateway; NULL: the same */
} s_tool_t;

static const s_tool_t s_tools[] = {
    {"python",
     AG_TOOLS_PYTHON_DESCRIPTION
     " A cell over its timeout is interrupted; if it does not stop, the "
     "kernel is restarted and its state is lost (the result says so).",
     ag_mcp_tool_python_json, ag_mcp_tool_python, NULL},
    {"list_files", NULL, NULL, ag_mcp_tool_list_files, NULL},
    {"read_file",
     "Read a file from the workspace /mnt/data (at most 4 MiB): text comes "
     "back as text, other files as a base64 blob resource. Only regular "
     "files; symlinks are refused.",
     ag_mcp_tool_read_file_json, ag_mcp_tool_read_file,
     "Read a file from the kernel's working directory on the Jupyter server "
     "(at most 4 MiB), through the kernel, every chunk checked by SHA-256: "
     "text comes back as text, other files as a base64 blob resource. Only "
     "regular files; symlinks are refused."},
    {"write_file",
     "Write a file into the workspace /mnt/data (at most 4 MiB), from text "
     "(content) or bytes (base64). Parent directories are created.",
     ag_mcp_tool_write_file_json, ag_mcp_tool_write_file,
     "Write a file into the kernel's working directory on the Jupyter server "
     "(at most 4 MiB), from text (content) or bytes (base64). Parent "
     "directories are created."},
    {"export_notebook",
     "The whole session as an nbformat 4.5 notebook (every python cell with "
     "its outputs): returned as a resource, or written to a host path under "
     "the directory the operator allowed (--notebook).",
     ag_mcp_tool_export_notebook_json, ag_mcp_tool_export, NULL},
    {"reset",
     "Restart the kernel: variables and imports are gone, files in the "
     "workspace stay.",
     ag_mcp_tool_reset_json, ag_mcp_tool_reset, NULL},
    {"install_packages", NULL, NULL, ag_mcp_tool_install, NULL},
    {"shell",
     "Run a shell command (sh -c) in the same sandbox as the python kernel: "
     "the same files (/mnt/data, /home/user, /tmp), the same user, no "
     "network. The working directory is /mnt/data unless cwd says "
     "otherwise. Output lines stream as progress; the result has stdout, "
     "stderr and the exit code. Bounded by the server's --timeout and 1 MiB "
     "of output (the command is killed past either); anything it leaves "
     "running is killed when the call returns.",
     ag_mcp_tool_shell_json, ag_mcp_tool_shell, NULL},
};

static const s_tool_t *
s_find(ag_mcp_box_t *b, const char *name)
{
    /* install_packages only where it can work: a signed manifest. */
    if (strcmp(name, "install_packages") == 0 && !b->cfg->session->packages_dir)
        return NULL;
    /* shell: commands in our own box (not a gateway's kernel). */
    if (strcmp(name, "shell") == 0 && b->cfg->session->gateway_url)
        return NULL;
    for (size_t i = 0; i < sizeof s_tools / sizeof s_tools[0]; i++)
        if (strcmp(s_tools[i].name, name) == 0)
            return &s_tools[i];
    return NULL;
}

bool
ag_mcp_box_has_tool(ag_mcp_box_t *b, const char *name)
{
    return s_find(b, name) != NULL;
}

/* ag_tools' declaration of `name` ({name, description, parameters}). */
static json_t *
s_builtin(ag_mcp_box_t *b, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(ag_tools_schemas(b->tools), i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return t;
    }
    return NULL;
}

json_t *
ag_mcp_box_tools(ag_mcp_box_t *b)
{
    json_t *list = json_array();
    bool remote = b->cfg->session->gateway_url;
    for (size_t i = 0; i < sizeof s_tools / sizeof s_tools[0]; i++) {
        const s_tool_t *d = &s_tools[i];
        if (!s_find(b, d->name))
            continue;
        json_t *own = s_builtin(b, d->name);
        json_t *schemas = d->schemas ? json_loads(d->schemas, 0, NULL) : NULL;
        if (NEVER(d->schemas && !json_is_object(schemas))) {
            /* A build without its schemas: tests/unit/mcp_schemas.sh. */
            log_error("mcp: the schemas of tool %s do not parse", d->name);
            json_decref(schemas);
            continue;
        }
        json_t *t = json_pack("{s:s}", "name", d->name);
        const char *description = remote && d->remote_description
                                      ? d->remote_description
                                      : d->description;
        if (description) {
            char *desc = ag_tools_describe(b->tools, description);
            json_object_set_new(t, "description", json_string(desc));
            free(desc);
        } else {
            json_object_set_new(
                t, "description",
                json_incref(json_object_get(own, "description")));
        }
        json_t *input = json_object_get(schemas, "input");
        json_t *remote_input = json_object_get(schemas, "remote_input");
        json_t *output = json_object_get(schemas, "output");
        if (remote && remote_input)
            input = remote_input;
        json_object_set(t, "inputSchema",
                        input ? input : json_object_get(own, "parameters"));
        if (output)
            json_object_set(t, "outputSchema", output);
        json_decref(schemas);
        json_array_append_new(list, t);
    }
    return list;
}

json_t *
ag_mcp_box_call(ag_mcp_box_t *b, const char *name, const json_t *args,
                const ag_mcp_call_t *call, bool *cancelled)
{
    const s_tool_t *d = s_find(b, name);
    b->call = call;
    b->stopped = b->outlived = false;
    b->progress_sent = 0;
    json_t *r =
        d ? d->fn(b, args)
          : ag_mcp_text_result(true, "error: there is no tool named %s", name);
    b->call = NULL;
    if (b->outlived) { /* an answer, not a cancellation */
        json_decref(r);
        ag_mcp_box_stop(b, "older than --max-lifetime");
        r = ag_mcp_text_result(
            true,
            "error: the session reached --max-lifetime (%g s) "
            "while this call ran: the cell was interrupted and "
            "the kernel stopped (variables gone); the next call "
            "starts a fresh one",
            b->cfg->session->max_lifetime_ms / 1000.0);
        b->stopped = false;
    }
    b->used_ms = clock_mono_ms();
    if (cancelled)
        *cancelled = b->stopped;
    return r;
}

ag_mcp_box_t *
ag_mcp_box_new(const ag_mcp_config_t *cfg)
{
    ag_mcp_box_t *b = xcalloc(1, sizeof *b);
    b->cfg = cfg;
    b->displays = kb_displays_new();
    b->record = nb_record_new();
    ag_mcp_bridge_init(b);
    b->status = "failed";
    pthread_mutex_init(&b->net_mu, NULL);
    return b;
}

static void
s_box_free(ag_mcp_box_t **p, bool hand_off)
{
    if (!p || !*p)
        return;
    ag_mcp_box_t *b = *p;
    /* The session ends with its client, who may not wait long (the SDK
     * kills a stdio server 4 s after closing its input): no graceful
     * kernel shutdown, the whole box goes. */
    if (hand_off)
        ag_session_hand_off(&b->session);
    else if (b->session)
        kb_kernel_kill(ag_session_kernel(b->session));
    ag_session_destroy(&b->session);
    ag_tools_destroy(&b->tools);
    nb_record_destroy(&b->record);
    kb_displays_destroy(&b->displays);
    free(b->expired_note);
    free(b->exported);
    free(b->net_rules);
    pthread_mutex_destroy(&b->net_mu);
    free(b);
    *p = NULL;
}

void
ag_mcp_box_destroy(ag_mcp_box_t **p)
{
    s_box_free(p, false);
}

void
ag_mcp_box_hand_off(ag_mcp_box_t **p)
{
    s_box_free(p, true);
}
