/*
 * ag_mcp_tools_impl.h: what the files behind ag_mcp_tools.h share (one
 * module, several jobs):
 *
 *   ag_mcp_tools.c   the tool table: tools/list, tools/call, a box's new
 *                    and destroy
 *   ag_mcp_bridge.c  python, list_files, install_packages: ag_tools run
 *                    against this box's session
 *   ag_mcp_files.c   read_file, write_file
 *   ag_mcp_export.c  export_notebook, reset, the notebook's metadata
 *   ag_mcp_shell.c   shell: a command in the session's own box
 *   ag_mcp_box.c     the session behind the tools: started at the first
 *                    call that needs it, expired, stopped; what the model
 *                    is told about it
 *
 * The calls go one way: ag_mcp_tools.c calls the others, and they call
 * only ag_mcp_box.c.
 */
#ifndef AGENT_MCP_AG_MCP_TOOLS_IMPL_H
#define AGENT_MCP_AG_MCP_TOOLS_IMPL_H

#include "agent/loop/ag_tools.h"
#include "agent/mcp/ag_mcp_tools.h"
#include "kernel-bridge/kb_output.h"
#include "notebook-io/nb_record.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* A file on the host, by identity: inode numbers are reused, and the
 * ctime (which no one can set) tells a new file from ours. */
typedef struct s_file_id {
    dev_t dev;
    ino_t ino;
    struct timespec ctime; /* after we moved it into place */
} s_file_id_t;

struct ag_mcp_box {
    const ag_mcp_config_t *cfg; /* borrowed */
    ag_session_t *session;      /* owned; NULL until the first call */
    ag_tools_t *tools;          /* owned: python, list_files[, install] */
    ag_tool_env_t env;          /* the tools' view of this box */
    kb_displays_t *displays;    /* owned: display ids across cells */
    nb_record_t *record;        /* owned: the session as a notebook */
    int64_t started_ms;         /* when the session started */
    int64_t used_ms;            /* when a call last ended */
    char *expired_note;         /* owned: why the last session stopped */
    int timeout_ms;             /* limit of the python call running */
    const char *status;         /* status of the last execution (static) */
    const ag_mcp_call_t *call;  /* the call running, borrowed; or NULL */
    bool stopped;               /* should_stop said yes during this call */
    bool outlived;              /* ... because of --max-lifetime */
    size_t progress_sent;       /* progress lines sent in this call */
    s_file_id_t *exported;      /* owned: files export_notebook wrote */
    size_t nexported;           /* entries in exported */
    /* The operator's --allow-net rules (ag_mcp_box_set_net_rules), from
     * an HTTP worker while a call runs: net_mu guards them and `session`
     * being set or cleared (ag_mcp_box.c). */
    pthread_mutex_t net_mu;
    char *net_rules; /* owned: set on this session, or NULL: the flags' */
};

/* A tool: args (an object, borrowed) in, a CallToolResult out (new). */
typedef json_t *(*ag_mcp_tool_fn)(ag_mcp_box_t *b, const json_t *args);

/* ag_mcp_box.c: the session, started when first needed (NULL + err when it
 * cannot start); stopping it, saying `why` to the next call. */
ag_session_t *ag_mcp_box_session(ag_mcp_box_t *b, err_t *err);
void ag_mcp_box_stop(ag_mcp_box_t *b, const char *why);
/* A CallToolResult of one text item. New reference. */
json_t *ag_mcp_text_result(bool is_error, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ag_mcp_bridge.c: the box's ag_tools and their view of the box (b->tools,
 * b->env), set up once by ag_mcp_box_new. */
void ag_mcp_bridge_init(ag_mcp_box_t *b);
json_t *ag_mcp_tool_python(ag_mcp_box_t *b, const json_t *args);
json_t *ag_mcp_tool_list_files(ag_mcp_box_t *b, const json_t *args);
json_t *ag_mcp_tool_install(ag_mcp_box_t *b, const json_t *args);

/* ag_mcp_files.c */
json_t *ag_mcp_tool_read_file(ag_mcp_box_t *b, const json_t *args);
json_t *ag_mcp_tool_write_file(ag_mcp_box_t *b, const json_t *args);

/* ag_mcp_export.c */
json_t *ag_mcp_tool_export(ag_mcp_box_t *b, const json_t *args);
json_t *ag_mcp_tool_reset(ag_mcp_box_t *b, const json_t *args);

/* ag_mcp_shell.c: `sh -c COMMAND` in the session's box
 * (sandbox/sb_cmds.h): the same files, user and confinement as the
 * kernel. Output lines stream as progress (at most 1000); the result has
 * stdout and stderr (head and tail kept past 64 KiB) and
 * structuredContent {exit_code, stdout, stderr, timed_out,
 * output_capped}; a non-zero exit, a timeout or a kill is isError. The
 * operator's --timeout is the default and bound of `timeout` (--timeout
 * 0: 3600 s); past 1 MiB of output the command is killed; whatever it
 * left in its process group is killed when the call returns or is
 * cancelled. */
json_t *ag_mcp_tool_shell(ag_mcp_box_t *b, const json_t *args);

/* The tools' JSON Schemas, agent/mcp/ag_mcp_tool_NAME.json built in by
 * tools/embed: {"input": ..., "output"?: ..., "remote_input"?: ...}
 * (remote_input: through a gateway). tests/unit/mcp_schemas.sh checks
 * each is a valid JSON Schema 2020-12 and that the table uses it. */
extern const char ag_mcp_tool_python_json[];
extern const char ag_mcp_tool_read_file_json[];
extern const char ag_mcp_tool_write_file_json[];
extern const char ag_mcp_tool_export_notebook_json[];
extern const char ag_mcp_tool_reset_json[];
extern const char ag_mcp_tool_shell_json[];

#endif
