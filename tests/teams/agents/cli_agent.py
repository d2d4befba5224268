"""A small CLI agent for the subprocess runner's tests: reads the task, calls tools, reports, answers.

Behaviour is chosen by the task subject: "count N" bumps a counter N times (via tool calls on stdout),
"plain" prints plain text, "hang" never answers, "fail" exits 3, "spawn" starts a grandchild that hangs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> int:
    task = json.loads(sys.stdin.readline())
    words = task["subject"].split()
    if words[0] == "count":
        results = []
        for i in range(int(words[1])):
            send({"type": "tool_call", "id": str(i), "name": "counter_bump", "input": {"name": task["task_id"]}})
            answer = json.loads(sys.stdin.readline())
            results.append(answer["output"]["n"] if answer["ok"] else f"error: {answer['kind']}")
        send({"type": "usage", "input_tokens": 100, "output_tokens": 20, "cost": 0.01})
        send({"type": "result", "reply": f"counted {results} in attempt {task['attempt']}"})
        return 0
    if words[0] == "plain":
        print(f"plain answer for {task['agent_id']}")
        return 0
    if words[0] == "hang":
        time.sleep(3600)
    if words[0] == "spawn":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        with open(os.environ["CLI_AGENT_PIDFILE"], "w") as f:
            f.write(str(child.pid))
        time.sleep(3600)
    if words[0] == "fail":
        print("something broke", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
