/*
 * ag_packages_tool: the agent's install_packages tool over pk_install.
 */
#include "agent/loop/ag_packages_tool.h"

#include "agent/loop/ag_tools.h"
#include "common/xalloc.h"
#include "packages/pk_install.h"

#include <stdlib.h>

json_t *
ag_packages_tool_schema(void)
{
    return json_pack("{s:s, s:s, s:o}", "name", "install_packages",
                     "description", AG_PACKAGES_TOOL_DESCRIPTION, "parameters",
                     json_loads(AG_PACKAGES_TOOL_PARAMETERS, 0, NULL));
}

int
ag_packages_tool_fn(const ag_tool_env_t *env, const json_t *args,
                    void *tool_arg, ag_tool_result_t *res, err_t *err)
{
    (void)tool_arg;
    (void)err;
    ag_session_t *s = env->session ? env->session(env->arg) : NULL;
    bool is_error = true;
    json_t *text =
        s ? ag_packages_tool(s, args, &is_error)
          : json_string("install_packages: there is no session to install "
                        "into");
    free(res->text);
    res->text = xstrdup(json_string_value(text));
    res->is_error = is_error;
    json_decref(text);
    return 0;
}

json_t *
ag_packages_tool(ag_session_t *s, const json_t *args, bool *is_error)
{
    err_t err = {0};
    const char **names = NULL;
    json_t *report = NULL, *text = NULL;
    const json_t *list = json_object_get(args, "names");
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n == 0) {
        text = json_string("install_packages: 'names' must be a non-empty "
                           "list of package names");
        goto out;
    }
    names = xcalloc(n, sizeof *names);
    for (size_t i = 0; i < n; i++) {
        names[i] = json_string_value(json_array_get(list, i));
        if (!names[i]) {
            text = json_string("install_packages: every entry of 'names' "
                               "must be a string");
            goto out;
        }
    }
    const char *dir = ag_session_packages_dir(s);
    if (!dir) {
        text = json_string(
            "install_packages: no package manifest is configured for this "
            "session (it was started without --packages DIR) and there is no "
            "network; only the packages already installed are available");
        goto out;
    }
    if (pk_install(ag_session_kernel(s), dir, ag_session_trust(s), names, n,
                   &report, &err)) {
        char *t = xasprintf("install_packages refused: %s", err.text);
        text = json_string(t);
        free(t);
        goto out;
    }
    ag_session_record_packages(s, report);
    char *sum = pk_install_summary(report);
    char *t = xasprintf("%s. They are on sys.path: import them now.", sum);
    text = json_string(t);
    free(t);
    free(sum);
    if (is_error)
        *is_error = false;
    goto done;
out:
    if (is_error)
        *is_error = true;
done:
    free(names);
    json_decref(report);
    return text;
}
