"""A raw JSON-RPC stdio server that speaks just enough MCP (legacy handshake) to be hostile.

tools/list offers one good tool and two malformed ones (a string-typed schema, a schema that is not an
object); calling ``flood`` answers with 3 MB of text; every other request gets "method not found".
"""

import json
import sys

GOOD = {"name": "flood", "description": "Answer with a lot of text.", "inputSchema": {"type": "object"}}
BAD_TYPE = {"name": "stringy", "description": "String schema.", "inputSchema": {"type": "string"}}
BAD_SHAPE = {"name": "listy", "description": "List schema.", "inputSchema": ["object"]}


def reply(msg_id, result=None, error=None):
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue
    if method == "initialize":
        reply(
            msg_id,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            },
        )
    elif method == "ping":
        reply(msg_id, {})
    elif method == "tools/list":
        reply(msg_id, {"tools": [GOOD, BAD_TYPE, BAD_SHAPE]})
    elif method == "tools/call":
        reply(msg_id, {"content": [{"type": "text", "text": "y" * 3_000_000}], "isError": False})
    else:
        reply(msg_id, error={"code": -32601, "message": f"method not found: {method}"})
