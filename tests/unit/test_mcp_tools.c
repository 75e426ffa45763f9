/* agent/mcp's tool table without a kernel: what tools/list offers (local,
 * through a gateway, with --packages), its schemas built in from
 * agent/mcp/ag_mcp_tool_*.json, and the argument checks that answer
 * before any kernel starts. */
#include "agent/loop/ag_tools.h"
#include "agent/mcp/ag_mcp_tools.h"
#include "tests/tap.h"

#include <stdlib.h>
#include <string.h>

static json_t *
s_tool(json_t *list, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return t;
    }
    return NULL;
}

static const char *
s_path_description(json_t *tool)
{
    return json_string_value(json_object_get(
        json_object_get(
            json_object_get(json_object_get(tool, "inputSchema"), "properties"),
            "path"),
        "description"));
}

/* The text of a CallToolResult's first item. */
static const char *
s_text(json_t *r)
{
    return json_string_value(json_object_get(
        json_array_get(json_object_get(r, "content"), 0), "text"));
}

static json_t *
s_call(ag_mcp_box_t *b, const char *name, const char *args)
{
    json_t *a = json_loads(args, 0, NULL);
    json_t *r = ag_mcp_box_call(b, name, a, NULL, NULL);
    json_decref(a);
    return r;
}

int
main(void)
{
    ag_session_opts_t o;
    ag_session_opts_init(&o);
    ag_mcp_config_t cfg = {.session = &o};

    /* ---- local ---- */
    ag_mcp_box_t *b = ag_mcp_box_new(&cfg);
    json_t *list = ag_mcp_box_tools(b);
    static const char *const names[] = {"python",          "list_files",
                                        "read_file",       "write_file",
                                        "export_notebook", "reset"};
    is_int(json_array_size(list), 7, "seven tools without --packages");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *t = s_tool(list, names[i]);
        json_t *in = json_object_get(t, "inputSchema");
        ok(t && json_is_string(json_object_get(t, "description")) &&
               json_is_object(in) &&
               strcmp(json_string_value(json_object_get(in, "type")),
                      "object") == 0,
           "%s is listed with a description and an object inputSchema",
           names[i]);
    }
    ok(!s_tool(list, "install_packages") &&
           !ag_mcp_box_has_tool(b, "install_packages"),
       "no install_packages without --packages");
    json_t *py = s_tool(list, "python");
    json_t *out = json_object_get(py, "outputSchema");
    ok(json_is_object(out) &&
           json_array_size(json_object_get(out, "required")) == 3,
       "python declares its structuredContent (status, execution_count, "
       "outputs)");
    ok(json_is_number(json_object_get(
           json_object_get(json_object_get(json_object_get(py, "inputSchema"),
                                           "properties"),
                           "timeout"),
           "maximum")),
       "python's timeout has its maximum");
    /* The code argument is described as the loop's python tool does. */
    size_t i;
    json_t *t, *own = NULL;
    ag_tools_t *loop_tools = ag_tools_new();
    json_array_foreach(ag_tools_schemas(loop_tools), i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), "python") ==
            0)
            own =
                json_object_get(json_object_get(t, "parameters"), "properties");
    }
    ok(own && json_equal(json_object_get(own, "code"),
                         json_object_get(
                             json_object_get(json_object_get(py, "inputSchema"),
                                             "properties"),
                             "code")),
       "python's code schema is the loop's own (AG_TOOLS_PYTHON_CODE_SCHEMA)");
    ag_tools_destroy(&loop_tools);
    const char *lp = s_path_description(s_tool(list, "read_file"));
    ok(lp && strstr(lp, "/mnt/data"), "read_file's path names /mnt/data");
    json_decref(list);

    /* Checks that answer before a kernel is started. */
    json_t *r = s_call(b, "nope", "{}");
    ok(json_is_true(json_object_get(r, "isError")) &&
           strstr(s_text(r), "no tool named nope"),
       "an unknown tool is an error naming it");
    json_decref(r);
    r = s_call(b, "python", "{\"code\": \"1\", \"timeout\": 99999}");
    ok(json_is_true(json_object_get(r, "isError")) &&
           strstr(s_text(r), "nothing was run"),
       "python with a timeout over the maximum runs nothing");
    json_decref(r);
    r = s_call(b, "write_file",
               "{\"path\": \"a\", \"content\": \"x\", \"base64\": \"eA==\"}");
    ok(json_is_true(json_object_get(r, "isError")) &&
           strstr(s_text(r), "exactly one of"),
       "write_file with both content and base64 is refused");
    json_decref(r);
    r = s_call(b, "read_file", "{\"path\": \"/etc/passwd\"}");
    ok(json_is_true(json_object_get(r, "isError")) &&
           strstr(s_text(r), "outside /mnt/data"),
       "read_file outside the workspace is refused");
    json_decref(r);
    r = s_call(b, "export_notebook", "{\"path\": \"x.ipynb\"}");
    ok(json_is_true(json_object_get(r, "isError")) &&
           strstr(s_text(r), "without --notebook"),
       "export_notebook to a path needs --notebook");
    json_decref(r);
    r = s_call(b, "export_notebook", "{}");
    ok(!json_is_true(json_object_get(r, "isError")) &&
           strstr(json_string_value(json_object_get(
                      json_object_get(
                          json_array_get(json_object_get(r, "content"), 0),
                          "resource"),
                      "text")),
                  "\"nbformat\": 4"),
       "export_notebook without a path returns the notebook");
    json_decref(r);
    r = s_call(b, "reset", "{}");
    ok(!json_is_true(json_object_get(r, "isError")) &&
           strstr(s_text(r), "no kernel was running"),
       "reset without a kernel says so");
    json_decref(r);
    ag_mcp_box_destroy(&b);

    /* ---- with --packages ---- */
    static char wheels[] = "/nonexistent-wheels";
    o.packages_dir = wheels;
    b = ag_mcp_box_new(&cfg);
    list = ag_mcp_box_tools(b);
    t = s_tool(list, "install_packages");
    ok(t && json_is_object(json_object_get(t, "inputSchema")) &&
           ag_mcp_box_has_tool(b, "install_packages"),
       "install_packages with --packages, with ag_tools' own schema");
    json_decref(list);
    ag_mcp_box_destroy(&b);
    o.packages_dir = NULL;

    /* ---- through a gateway ---- */
    static char url[] = "http://127.0.0.1:9";
    o.gateway_url = url;
    b = ag_mcp_box_new(&cfg);
    list = ag_mcp_box_tools(b);
    const char *rp = s_path_description(s_tool(list, "read_file"));
    const char *wp = s_path_description(s_tool(list, "write_file"));
    ok(rp && wp && strstr(rp, "working directory") &&
           strstr(wp, "working directory") && !strstr(rp, "/mnt/data"),
       "through a gateway, read_file and write_file take remote paths");
    ok(strstr(json_string_value(
                  json_object_get(s_tool(list, "read_file"), "description")),
              "Jupyter server") != NULL,
       "... and say so in their descriptions");
    json_decref(list);
    ag_mcp_box_destroy(&b);
    o.gateway_url = NULL;
    ag_session_opts_release(&o);
    return done_testing();
}
