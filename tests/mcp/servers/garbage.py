"""A 'server' that prints malformed JSON on stdout and never speaks MCP."""

import sys
import time

for i in range(50):
    sys.stdout.write("{not json at all " + "}" * i + "\n")
    sys.stdout.write("\x00\x01\x02 garbage\n")
sys.stdout.write('{"jsonrpc": "2.0", "id": 999, "result": {"bogus": true}}\n')
sys.stdout.flush()
time.sleep(3600)
