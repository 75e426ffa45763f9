/*
 * kernel_run: helpers for C tests that drive a real kernel through
 * kb_kernel (header-only, like fake_llm.h).
 */
#ifndef TESTS_TOOLS_KERNEL_RUN_H
#define TESTS_TOOLS_KERNEL_RUN_H

#include "../tap.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"

#include <sys/resource.h>

/* kb_kernel_opts_t.launcher for a default sandbox. */
static inline kb_launcher_t *
kernel_run_sandbox(void *arg, err_t *err)
{
    (void)arg;
    return kb_launcher_sandbox_new(NULL, err);
}

/* Peak RSS of this process (the agent side; kernels are others) in MiB. */
static inline long
kernel_run_peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* Run `code` in the kernel within timeout_ms; its first output's text
 * (stdout and stderr merged; caller frees) or NULL, the error as a diag. */
static inline char *
kernel_run_text(kb_kernel_t *k, const char *code, int timeout_ms)
{
    err_t err;
    kb_output_t *out = kb_output_new(NULL, 1 << 20);
    kb_output_merge_streams(out, true);
    char *text = NULL;
    if (kb_kernel_execute(k, code, NULL, timeout_ms, out, NULL, &err) == 0) {
        json_t *o = json_array_get(kb_output_outputs(out), 0);
        const char *t = json_string_value(json_object_get(o, "text"));
        text = t ? xstrdup(t) : NULL;
    } else {
        diag("%s", err.text);
    }
    kb_output_destroy(&out);
    return text;
}

#endif
