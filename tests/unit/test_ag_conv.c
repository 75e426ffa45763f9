/* ag_conv: the neutral transcript keeps what it is given, in order. */
#include "agent/llm/ag_conv.h"
#include "tests/tap.h"

#include <stdlib.h>

int
main(void)
{
    ag_conv_t *c = ag_conv_new("be brief");
    is_str(ag_conv_system(c), "be brief", "the system prompt is kept");
    is_int((long)ag_conv_count(c), 0, "a new conversation has no messages");

    char user[] = "plot the data";
    ag_conv_add_user(c, user);
    user[0] = 'X';
    is_str(ag_conv_get(c, 0)->text, "plot the data",
           "appending copies the text (the caller's buffer may change)");

    char args[] = "{\"code\": \"print(1)\"}";
    ag_tool_call_t calls[2] = {{"call_1", "python", args},
                               {"call_2", "list_files", NULL}};
    ag_conv_add_assistant(c, NULL, calls, 2);
    args[1] = 'Z';
    const ag_msg_t *m = ag_conv_get(c, 1);
    ok(m->kind == AG_MSG_ASSISTANT && m->ncalls == 2,
       "an assistant turn keeps its tool calls");
    is_str(m->text, "", "a NULL assistant text is stored as \"\"");
    is_str(m->calls[0].arguments, "{\"code\": \"print(1)\"}",
           "tool call arguments are copied byte for byte");
    is_str(m->calls[1].arguments, "", "NULL arguments are stored as \"\"");

    ag_image_t img = {"image/png", "iVBORw0KGgo="};
    ag_conv_add_tool_result(c, "call_1", "python", "1\n", 0, &img, 1);
    ag_conv_add_tool_result(c, "call_2", "list_files", "no such dir", 7, NULL,
                            0);
    m = ag_conv_get(c, 2);
    ok(m->kind == AG_MSG_TOOL_RESULT && m->nimages == 1 &&
           strcmp(m->images[0].data, "iVBORw0KGgo=") == 0 &&
           strcmp(m->images[0].mime, "image/png") == 0,
       "a tool result keeps its image");
    is_str(m->tool_call_id, "call_1",
           "a tool result names the call it "
           "answers");
    is_int(ag_conv_get(c, 3)->is_error, 1,
           "a non-zero is_error is stored as 1");
    ok(ag_conv_get(c, 4) == NULL, "reading past the end gives NULL");
    is_int((long)ag_conv_count(c), 4, "four messages were appended");

    json_t *j = ag_conv_to_json(c);
    char *s1 = json_dumps(j, JSON_SORT_KEYS);
    err_t err = {0};
    ag_conv_t *c2 = ag_conv_from_json(j, &err);
    ok(c2 != NULL, "a conversation's JSON loads back (%s)", err.text);
    json_t *j2 = c2 ? ag_conv_to_json(c2) : NULL;
    char *s2 = j2 ? json_dumps(j2, JSON_SORT_KEYS) : NULL;
    is_str(s2, s1, "to_json/from_json round-trips every field");
    is_str(json_string_value(json_object_get(
               json_array_get(json_object_get(j, "messages"), 2), "role")),
           "tool", "tool results are written with role \"tool\"");
    free(s1);
    free(s2);
    json_decref(j2);
    json_decref(j);
    ag_conv_destroy(&c2);

    json_t *bad = json_loads(
        "{\"system\":\"\",\"messages\":[{\"role\":\"wizard\",\"text\":\"x\"}]}",
        0, NULL);
    err_clear(&err);
    ok(ag_conv_from_json(bad, &err) == NULL && err.code == ERR_USAGE,
       "an unknown role is rejected");
    ok(strstr(err.text, "message 0") != NULL,
       "the error names the malformed message");
    json_decref(bad);
    bad = json_loads("{\"messages\":[{\"role\":\"assistant\",\"text\":\"\","
                     "\"tool_calls\":[{\"id\":\"a\",\"name\":3}]}]}",
                     0, NULL);
    ok(ag_conv_from_json(bad, NULL) == NULL,
       "a tool call with a non-string name is rejected");
    json_decref(bad);

    ag_conv_set_system(c, NULL);
    is_str(ag_conv_system(c), "", "a NULL system prompt means none");
    ag_conv_destroy(&c);
    ok(c == NULL, "destroy nulls the caller's pointer");
    ag_conv_destroy(&c);
    ok(1, "destroying NULL is harmless");
    return done_testing();
}
