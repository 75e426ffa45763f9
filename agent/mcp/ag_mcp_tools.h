/*
 * ag_mcp_tools: the tools an MCP session offers and the sandboxed Python
 * session behind them (a "box": one kernel, its /mnt/data, its notebook).
 *
 * Tools (JSON Schema 2020-12 input schemas):
 *   python(code, timeout?)   a cell in the session's kernel; state persists.
 *                            Text content (ANSI stripped, head+tail cut as
 *                            `ask` does: agent/loop/ag_tools.h), image items
 *                            for PNG/JPEG outputs, structuredContent
 *                            {status, execution_count, outputs} (nbformat
 *                            outputs) declared by outputSchema; a raised
 *                            error, a timeout or a death is isError:true.
 *   list_files()             the files in /mnt/data with their sizes.
 *   read_file(path)          a file from /mnt/data (sandbox/sb_files.h
 *                            rules: no symlinks on the way, regular files
 *                            only, at most AG_MCP_MAX_FILE bytes): text, or
 *                            an embedded resource with a base64 blob.
 *   write_file(path, content | base64)  into /mnt/data, at most
 *                            AG_MCP_MAX_FILE bytes; written by the box's own
 *                            user from inside the box.
 *   With a gateway (a kernel on a Jupyter server), read_file and
 *   write_file work on the kernel's working directory (path relative to
 *   it): write_file as above, read_file through the kernel with
 *   kb_files_read (kernel-bridge/kb_files.h: every chunk checked here).
 *   export_notebook(path?)   the session as an nbformat 4.5 notebook:
 *                            written under the directory of --notebook, or
 *                            returned as an embedded resource. Written
 *                            from the directory's fd with openat2
 *                            (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), as a
 *                            new file or over one this session wrote (by
 *                            device, inode and ctime); anything else there
 *                            is refused, never replaced.
 *   reset()                  a fresh kernel (variables gone, files kept).
 *   install_packages(names)  only when the session has --packages DIR
 *                            (agent/loop/ag_packages.h).
 *
 * The kernel starts at the first call that needs it (ag_session_start: a
 * warm kernel from `serve`'s pool when one runs). A session idle longer
 * than its --idle-timeout, or older than --max-lifetime, is stopped; the
 * next call starts a fresh one and says so.
 *
 * A box is used by one thread at a time; ag_mcp_box_destroy kills its
 * kernel and removes its sandbox.
 */
#ifndef AGENT_MCP_AG_MCP_TOOLS_H
#define AGENT_MCP_AG_MCP_TOOLS_H

#include "agent/session/ag_session.h"
#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>

/* The largest file read_file returns and write_file accepts. */
#define AG_MCP_MAX_FILE ((size_t)4 * 1024 * 1024)
/* The longest per-call python timeout a client may ask for, seconds. */
#define AG_MCP_MAX_TIMEOUT_S 3600

typedef struct ag_mcp_box ag_mcp_box_t;

/* What every box of a server shares. Borrowed; outlives the boxes. */
typedef struct ag_mcp_config {
    const ag_session_opts_t *session; /* policy, files, packages, limits */
    const char *notebook_path;        /* --notebook PATH: export_notebook writes
                                         under its directory; NULL = resource only */
    size_t max_image_bytes; /* --max-image-bytes: base64 bytes per image
                               item; 0 = AG_MCP_MAX_IMAGE_BYTES */
} ag_mcp_config_t;

/* Image items above this are scaled down (PNG) or left out: MCP clients
 * cap a tool result's size (datalayer/jupyter-mcp-server#200). */
#define AG_MCP_MAX_IMAGE_BYTES ((size_t)256 << 10)

/* How a running call reports back; every member may be NULL. */
typedef struct ag_mcp_call {
    /* One line the cell printed (the client asked for progress). */
    void (*progress)(void *arg, const char *line);
    /* Polled about every 100 ms: true cancels the call (the kernel is
     * interrupted; its state is kept). */
    bool (*should_stop)(void *arg);
    /* Something the client should know (level "warning", "info" ...), e.g.
     * that the session runs without a sandbox or without some limits. */
    void (*log)(void *arg, const char *level, const char *text);
    void *arg;
} ag_mcp_call_t;

ag_mcp_box_t *ag_mcp_box_new(const ag_mcp_config_t *cfg);
void ag_mcp_box_destroy(ag_mcp_box_t **p);
/* ag_mcp_box_destroy() for a process about to exit (stdio at end of
 * input): the kernel is not waited for (ag_session_hand_off). */
void ag_mcp_box_hand_off(ag_mcp_box_t **p);

/* The tools as tools/list returns them: [{name, description, inputSchema
 * [, outputSchema]}]. New reference. */
json_t *ag_mcp_box_tools(ag_mcp_box_t *b);
/* Is there a tool called `name`? */
bool ag_mcp_box_has_tool(ag_mcp_box_t *b, const char *name);

/* Run tool `name` with `args` (an object, borrowed). Returns the
 * CallToolResult {content, isError[, structuredContent]} (new reference).
 * *cancelled (may be NULL) says whether should_stop stopped it. */
json_t *ag_mcp_box_call(ag_mcp_box_t *b, const char *name, const json_t *args,
                        const ag_mcp_call_t *call, bool *cancelled);

/* Stop the kernel when the session passed its idle timeout or lifetime
 * (the next call starts a fresh one). For servers that wait idle. */
void ag_mcp_box_expire(ag_mcp_box_t *b);

/* The operator's door (never a tool): replace the box's --allow-net
 * rules for its next connections, and for the kernels a reset starts
 * (sb_sandbox_set_net_rules' errors; ERR_USAGE when the server was
 * started without --allow-net). Safe while a call runs. 0 or -1. */
int ag_mcp_box_set_net_rules(ag_mcp_box_t *b, const char *rules, err_t *err);
/* The rules in force (new string), or NULL without --allow-net. */
char *ag_mcp_box_net_rules(ag_mcp_box_t *b);

/* Write the session so far as a notebook to `path`. 0, or -1 + err. */
int ag_mcp_box_save_notebook(ag_mcp_box_t *b, const char *path, err_t *err);

/* The instructions for the model: what the sandbox is and allows. New. */
char *ag_mcp_instructions(const ag_mcp_config_t *cfg);

#endif
