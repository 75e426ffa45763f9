/*
 * log: the one place library code may write diagnostics.
 *
 * Messages go to stderr (or a sink set by the program) only when their level
 * is at or above the threshold; the default threshold is LOG_WARN, raised to
 * LOG_DEBUG by JUPYTER_AGENT_LOG=debug or -v. Never log a secret.
 */
#ifndef COMMON_LOG_H
#define COMMON_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

typedef void (*log_sink_fn)(enum log_level level, const char *line, void *arg);

void log_set_level(enum log_level level);
/* Read JUPYTER_AGENT_LOG (debug|info|warn|error|off) if set. */
void log_init_from_env(void);
/* Replace the stderr sink; NULL restores it. */
void log_set_sink(log_sink_fn fn, void *arg);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
