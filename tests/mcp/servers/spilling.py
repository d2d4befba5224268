"""A raw JSON-RPC stdio server (legacy handshake) that writes one enormous line before it answers.

``spill {megabytes}`` writes that many MiB on one line (no newline until the end), then its answer;
``echo {text}`` answers at once. A host that buffers a whole line holds all of it (and, joining piece
after piece, takes quadratic time); a bounded reader drops it and reads the answer that follows.
"""

import json
import os
import sys

TOOLS = [
    {"name": "spill", "description": "Write a huge line.", "inputSchema": {"type": "object"}},
    {"name": "echo", "description": "Echo the text.", "inputSchema": {"type": "object"}},
]


def reply(msg_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if msg_id is None:
        continue
    if method == "initialize":
        info = {"name": "spilling", "version": "0"}
        reply(msg_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info})
    elif method == "ping":
        reply(msg_id, {})
    elif method == "tools/list":
        reply(msg_id, {"tools": TOOLS})
    elif method == "tools/call" and params.get("name") == "spill":
        sys.stdout.flush()
        piece = b"x" * (1 << 20)
        for _ in range(int(params.get("arguments", {}).get("megabytes", 1))):
            os.write(1, piece)
        os.write(1, b"\n")
        reply(msg_id, {"content": [{"type": "text", "text": "spilled"}], "isError": False})
    elif method == "tools/call":
        reply(msg_id, {"content": [{"type": "text", "text": str(params.get("arguments", {}).get("text"))}]})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": method}}))
        sys.stdout.write("\n")
        sys.stdout.flush()
