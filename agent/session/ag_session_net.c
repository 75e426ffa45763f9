/*
 * ag_session_net: a running session's --allow-net rules, changed by the
 * operator through a server's door (serve, mcp --http, E2B).
 */
#include "agent/session/ag_session.h"

#include "common/buf.h"
#include "common/xalloc.h"

#include <string.h>

int
ag_session_set_net_rules(ag_session_t *s, const char *rules, err_t *err)
{
    sb_sandbox_t *box = s ? ag_session_sandbox(s) : NULL;
    if (box)
        return sb_sandbox_set_net_rules(box, rules, err);
    if (s && ag_session_is_warm(s))
        return err_set(err, ERR_USAGE,
                       "this session's kernel came warm from 'jupyter-agent "
                       "serve', whose process runs its box and proxy: change "
                       "the rules there (serve --set-net PID:RULES)");
    return err_set(err, ERR_USAGE,
                   "this session has no sandbox (--no-sandbox, a gateway or "
                   "an attached kernel), so no egress proxy");
}

char *
ag_net_rules_join(const json_t *v)
{
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (!json_is_array(v))
        return NULL;
    buf_t b;
    buf_init(&b, 64 * 1024);
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e)
    {
        const char *r = json_string_value(e);
        if (!r || !*r || strchr(r, ',') ||
            buf_printf(&b, "%s%s", i ? "," : "", r) < 0) {
            buf_release(&b);
            return NULL;
        }
    }
    char *out = xstrdup(b.len ? b.data : "");
    buf_release(&b);
    return out;
}
