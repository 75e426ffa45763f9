"""Write a replay session for `--model replay:FILE`: one python tool call
per CODE argument, then a final answer.

usage: replay_session.py OUT.jsonl CODE...
"""
import json
import sys

out, codes = sys.argv[1], sys.argv[2:]
usage = {"input_tokens": 0, "output_tokens": 0}
turns = [{"jupyter_agent_replay": 1, "model": "test:replay-session"}]
for i, code in enumerate(codes, 1):
    turns.append({"text": "Running step %d." % i,
                  "tool_calls": [{"id": "c%d" % i, "name": "python",
                                  "arguments": json.dumps({"code": code})}],
                  "stop_reason": "tool_use", "usage": usage})
turns.append({"text": "Done.", "tool_calls": [], "stop_reason": "end_turn",
              "usage": usage})
with open(out, "w") as f:
    for t in turns:
        f.write(json.dumps(t) + "\n")
