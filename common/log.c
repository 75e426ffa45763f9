#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum log_level s_level = LOG_WARN;
static log_sink_fn s_sink;
static void *s_sink_arg;

void
log_set_level(enum log_level level)
{
    s_level = level;
}

void
log_init_from_env(void)
{
    static const char *const names[] = {"debug", "info", "warn", "error",
                                        "off"};
    const char *v = getenv("JUPYTER_AGENT_LOG");
    if (!v)
        return;
    for (int i = 0; i <= LOG_OFF; i++)
        if (strcmp(v, names[i]) == 0)
            s_level = (enum log_level)i;
}

void
log_set_sink(log_sink_fn fn, void *arg)
{
    s_sink = fn;
    s_sink_arg = arg;
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"debug", "info", "warning", "error"};
    if (level < s_level || level >= LOG_OFF)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s_sink) {
        s_sink(level, line, s_sink_arg);
        return;
    }
    fprintf(stderr, "jupyter-agent: %s: %s\n", tags[level], line);
}
