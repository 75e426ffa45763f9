/* The session behind an MCP box: life cycle and instructions (see
 * ag_mcp_tools_impl.h). */
#include "agent/mcp/ag_mcp_tools_impl.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void
ag_mcp_box_stop(ag_mcp_box_t *b, const char *why)
{
    if (!b->session)
        return;
    log_info("mcp: stopping the session's kernel: %s", why);
    pthread_mutex_lock(&b->net_mu);
    ag_session_t *s = b->session;
    b->session = NULL;
    pthread_mutex_unlock(&b->net_mu);
    ag_session_destroy(&s);
    free(b->expired_note);
    b->expired_note = xasprintf("the previous kernel was stopped (%s): "
                                "variables and files are gone",
                                why);
}

void
ag_mcp_box_expire(ag_mcp_box_t *b)
{
    if (!b->session)
        return;
    const ag_session_opts_t *o = b->cfg->session;
    int64_t now = clock_mono_ms();
    if (o->idle_timeout_ms > 0 && now - b->used_ms > o->idle_timeout_ms)
        ag_mcp_box_stop(b, "idle longer than --idle-timeout");
    else if (o->max_lifetime_ms > 0 && now - b->started_ms > o->max_lifetime_ms)
        ag_mcp_box_stop(b, "older than --max-lifetime");
}

ag_session_t *
ag_mcp_box_session(ag_mcp_box_t *b, err_t *err)
{
    ag_mcp_box_expire(b);
    if (b->session)
        return b->session;
    ag_session_t *s = ag_session_start(b->cfg->session, err);
    if (!s)
        return NULL;
    pthread_mutex_lock(&b->net_mu);
    b->session = s;
    err_t nerr = {0}; /* the operator's rules outlive a reset */
    if (b->net_rules && ag_session_set_net_rules(s, b->net_rules, &nerr) < 0)
        log_warn("mcp: --allow-net: %s", nerr.text);
    pthread_mutex_unlock(&b->net_mu);
    b->started_ms = b->used_ms = clock_mono_ms();
    ag_session_print_warnings(b->session, stderr);
    const char *w = ag_session_warnings(b->session);
    if (*w && b->call && b->call->log)
        b->call->log(b->call->arg, "warning", w);
    ag_session_record_kernel(b->session, b->record);
    return b->session;
}

int
ag_mcp_box_set_net_rules(ag_mcp_box_t *b, const char *rules, err_t *err)
{
    if (!b->cfg->session->policy.allow_net)
        return err_set(err, ERR_USAGE,
                       "this server was started without --allow-net, so its "
                       "boxes have no egress proxy; start mcp with "
                       "--allow-net RULES to change rules later");
    if (sb_net_rules_check(rules, err) < 0)
        return -1;
    pthread_mutex_lock(&b->net_mu);
    int rc = b->session ? ag_session_set_net_rules(b->session, rules, err) : 0;
    if (rc == 0) {
        free(b->net_rules);
        b->net_rules = xstrdup(rules);
    }
    pthread_mutex_unlock(&b->net_mu);
    return rc;
}

char *
ag_mcp_box_net_rules(ag_mcp_box_t *b)
{
    const char *flags = b->cfg->session->policy.allow_net;
    if (!flags)
        return NULL;
    pthread_mutex_lock(&b->net_mu);
    char *r = xstrdup(b->net_rules ? b->net_rules : flags);
    pthread_mutex_unlock(&b->net_mu);
    return r;
}

json_t *
ag_mcp_text_result(bool is_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
                          "text", text, "isError", is_error);
    free(text);
    return r;
}

/* ---- instructions ----------------------------------------------------- */

char *
ag_mcp_instructions(const ag_mcp_config_t *cfg)
{
    const ag_session_opts_t *o = cfg->session;
    const sb_policy_t *p = &o->policy;
    char mem[32], disk[32];
    sb_policy_format_bytes(p->memory_bytes, mem, sizeof mem);
    sb_policy_format_bytes(p->workspace_bytes, disk, sizeof disk);
    /* What the box can import: the host's /usr is mounted read-only. */
    static const char *const libs[][2] = {
        {"numpy", "numpy"},           {"pandas", "pandas"},
        {"matplotlib", "matplotlib"}, {"scipy", "scipy"},
        {"sklearn", "scikit-learn"},  {"statsmodels", "statsmodels"},
        {"sympy", "sympy"},           {"PIL", "pillow"},
        {"openpyxl", "openpyxl"},     {"pyarrow", "pyarrow"},
        {"seaborn", "seaborn"},       {"networkx", "networkx"}};
    buf_t l;
    buf_init(&l, 0);
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        char *dir = xasprintf("/usr/lib/python3/dist-packages/%s", libs[i][0]);
        if (access(dir, F_OK) == 0)
            buf_printf(&l, "%s%s", l.len ? ", " : "", libs[i][1]);
        free(dir);
    }
    const char *libs_text = l.len ? buf_cstr(&l) : "the standard library";
    char *text;
    if (o->gateway_url)
        text = xasprintf(
            "A Python code interpreter whose IPython kernel runs on a Jupyter "
            "server (%s), one kernel per MCP session, in a private working "
            "directory of its own there. State persists between python "
            "calls, as in a notebook. The server's operator sets its "
            "isolation, libraries and limits. %g s per python call by "
            "default (then the cell is interrupted). Plots come back as "
            "images (call plt.show()). list_files lists the session's "
            "directory; write_file/read_file move files in and out of it "
            "(at most 4 MiB each); export_notebook returns the session as a "
            "Jupyter notebook; reset restarts the kernel.",
            o->gateway_url, o->timeout_ms / 1000.0);
    else if (o->no_sandbox)
        text = xasprintf(
            "A local Python code interpreter WITHOUT a sandbox "
            "(--no-sandbox): each MCP session has its own IPython kernel, "
            "running as a plain process with the operator's full access to "
            "files and network. State persists between python calls, as in "
            "a notebook. Libraries: %s. %g s per python call by default "
            "(then the cell is interrupted). Plots come back as images (call "
            "plt.show()). export_notebook returns the session as a Jupyter "
            "notebook; reset restarts the kernel.",
            libs_text, o->timeout_ms / 1000.0);
    else
        text = xasprintf(
            "A local Python code interpreter: each MCP session has its own "
            "IPython kernel in a Linux-namespace sandbox. State persists "
            "between python calls, as in a notebook. The sandbox has NO "
            "network (pip install from PyPI cannot work%s). Files live in "
            "/mnt/data (%s; use write_file/read_file to move files in and "
            "out, at most 4 MiB each; list_files lists them). Libraries: %s. "
            "Limits: %s of memory, %g CPU, %u processes, %g s per python "
            "call by default (then the cell is interrupted). Plots come back "
            "as images (call plt.show()). export_notebook returns the "
            "session as a Jupyter notebook; reset restarts the kernel.",
            o->packages_dir ? "; install_packages installs from the "
                              "operator's signed wheels"
                            : "",
            disk, libs_text, mem, p->cpus, p->pids, o->timeout_ms / 1000.0);
    buf_release(&l);
    return text;
}
