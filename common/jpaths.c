/*
 * jpaths: jupyter_core's data and runtime directories.
 */
#include "common/jpaths.h"

#include "common/xalloc.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

static const char *
s_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

char *
jpaths_data_dir(void)
{
    const char *v = s_env("JUPYTER_DATA_DIR");
    if (v)
        return xstrdup(v);
    if ((v = s_env("XDG_DATA_HOME")))
        return xasprintf("%s/jupyter", v);
    if (!(v = s_env("HOME"))) {
        struct passwd *pw = getpwuid(getuid());
        v = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
    return v ? xasprintf("%s/.local/share/jupyter", v) : NULL;
}

char *
jpaths_runtime_dir(void)
{
    const char *v = s_env("JUPYTER_RUNTIME_DIR");
    if (v)
        return xstrdup(v);
    char *data = jpaths_data_dir();
    char *dir = data ? xasprintf("%s/runtime", data) : NULL;
    free(data);
    return dir;
}
