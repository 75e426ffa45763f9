/*
 * ag_packages_tool: the agent's `install_packages` tool. The install
 * itself is packages/pk_install.h; this adds the session (its --packages
 * DIR, trusted keys and kernel) and records what was installed in it.
 */
#ifndef AGENT_LOOP_AG_PACKAGES_TOOL_H
#define AGENT_LOOP_AG_PACKAGES_TOOL_H

#include "agent/session/ag_session.h"
#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>

/* The agent's `install_packages` tool: `args` (borrowed) is
 * {"names": ["pandas", "x==1.0", ...]}; uses the session's --packages DIR
 * and trusted keys. Returns the tool result text as a new JSON string
 * (never NULL); *is_error (may be NULL) says whether it is a refusal. */
json_t *ag_packages_tool(ag_session_t *s, const json_t *args, bool *is_error);

/* The same as an ag_tools handler (agent/loop/ag_tools.h), registered in its
 * built-in table as
 *   {"install_packages", AG_PACKAGES_TOOL_DESCRIPTION,
 *    AG_PACKAGES_TOOL_PARAMETERS, ag_packages_tool_fn, NULL}
 * The session comes from env->session; the result is text only (no
 * notebook cell: the install is recorded in the session's metadata). */
struct ag_tool_env;
struct ag_tool_result;
int ag_packages_tool_fn(const struct ag_tool_env *env, const json_t *args,
                        void *tool_arg, struct ag_tool_result *res, err_t *err);

#define AG_PACKAGES_TOOL_DESCRIPTION                                           \
    "Install Python packages into this session's kernel from the "             \
    "operator's signed package manifest. There is no network: pip install "    \
    "from PyPI cannot work, and only packages in the manifest (with their "    \
    "dependencies, also from the manifest) can be installed. After success "   \
    "they import directly, without a restart. A refusal lists what the "       \
    "manifest offers."
#define AG_PACKAGES_TOOL_PARAMETERS                                            \
    "{\"type\": \"object\", \"properties\": {\"names\": {\"type\": "           \
    "\"array\", \"items\": {\"type\": \"string\"}, \"minItems\": 1, "          \
    "\"description\": \"project names, optionally pinned: [\\\"pandas\\\", "   \
    "\\\"numpy==1.26.4\\\"]\"}}, \"required\": [\"names\"], "                  \
    "\"additionalProperties\": false}"

/* {"name", "description", "parameters" (parsed JSON Schema)}: the same
 * declaration as one JSON object. New reference. */
json_t *ag_packages_tool_schema(void);

#endif
