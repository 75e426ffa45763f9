"""The MCP tools' JSON Schemas (agent/mcp/ag_mcp_tool_NAME.json, built into
the binary by tools/embed) are valid JSON Schema 2020-12, shaped as
ag_mcp_tools.c reads them, and each is declared and used by the tool table.
TAP on stdout. Usage: check_mcp_schemas.py [REPO]"""
import glob
import json
import os
import re
import sys

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

KEYS = {"input", "output", "remote_input"}
n = failed = 0


def ok(cond, what, why=""):
    global n, failed
    n += 1
    if cond:
        print(f"ok {n} - {what}")
    else:
        failed += 1
        print(f"not ok {n} - {what}")
        for line in str(why).splitlines():
            print(f"# {line}")


def schema_error(s):
    """'' when s is a valid 2020-12 schema, else why not."""
    try:
        Draft202012Validator.check_schema(s)
        return ""
    except SchemaError as e:
        return e.message


def check_file(path):
    try:
        doc = json.load(open(path, encoding="utf-8"))
    except ValueError as e:
        ok(False, f"{path} is JSON", e)
        return
    ok(isinstance(doc, dict) and "input" in doc and set(doc) <= KEYS,
       f"{path} is an object of {sorted(KEYS)} with an input",
       f"keys: {sorted(doc) if isinstance(doc, dict) else type(doc)}")
    if not isinstance(doc, dict):
        return
    for key, s in doc.items():
        why = schema_error(s)
        ok(not why, f"{path}: {key} is a valid JSON Schema 2020-12", why)
        if key != "output":
            ok(isinstance(s, dict) and s.get("type") == "object"
               and s.get("additionalProperties") is False,
               f"{path}: {key} takes an object and nothing it does not name")


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    files = sorted(glob.glob(os.path.join(repo, "agent/mcp/ag_mcp_tool_*.json")))
    ok(len(files) >= 5, f"found {len(files)} schema files")
    impl = open(os.path.join(repo, "agent/mcp/ag_mcp_tools_impl.h")).read()
    table = open(os.path.join(repo, "agent/mcp/ag_mcp_tools.c")).read()
    for f in files:
        check_file(f)
        sym = os.path.basename(f)[:-len(".json")] + "_json"
        ok(re.search(rf"extern const char {sym}\[\];", impl),
           f"{sym} is declared in ag_mcp_tools_impl.h")
        ok(re.search(rf"\b{sym}\b", table), f"{sym} is used by the tool table")
    for sym in sorted(set(re.findall(r"\b(ag_mcp_tool_\w+)_json\b", table))):
        ok(os.path.exists(os.path.join(repo, "agent/mcp", sym + ".json")),
           f"the table's {sym}_json has its file agent/mcp/{sym}.json")
    # The check itself: a schema that is not one is caught.
    ok(schema_error({"type": 5}) and schema_error({"properties": []}),
       "the check refuses an invalid schema")
    print(f"1..{n}")
    print(f"{n - failed} passed, {failed} failed")
    return 1 if failed else 0


sys.exit(main())
