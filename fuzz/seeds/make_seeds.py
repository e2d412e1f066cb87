#!/usr/bin/env python3
"""Writes the seed inputs in fuzz/seeds/<target>/ from src/protocol/testdata and
the envelope examples of src/protocol/envelope.rs. Re-run after changing either;
the output is committed (the fuzzers' own corpus/ is not)."""
import hashlib, json, pathlib, re, shutil

HERE = pathlib.Path(__file__).resolve().parent
TESTDATA = HERE.parent.parent / "src" / "protocol" / "testdata"

def write(target, data):
    out = HERE / target
    out.mkdir(exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)

for target in ("sse_decoder", "chunk_decode", "ws_envelope", "ws_frame", "markdown"):
    shutil.rmtree(HERE / target, ignore_errors=True)

fixtures = sorted(TESTDATA.glob("*.jsonl"))
for fixture in fixtures:
    lines = [l for l in fixture.read_text().splitlines() if l.strip()]
    # chunk_decode: the fixture as one run of responses, approvals answered.
    script = []
    for line in lines:
        if line == "[DONE]":
            script.append("!next")
            continue
        script.append(line)
        m = re.search(r'"approvalId":"([^"]+)"', line)
        if m:
            script.append(f"!approve {m.group(1)}")
    write("chunk_decode", "\n".join(script) + "\n")
    for line in lines:
        if line != "[DONE]":
            write("chunk_decode", line)
    # sse_decoder: the fixture framed as SSE, default cap (LF) and 64-byte cap (CRLF).
    frames = "".join(f"data: {line}\n\n" for line in lines)
    write("sse_decoder", b"\x00\x07" + frames.encode())
    write("sse_decoder", b"\xbf\x2a" + frames.replace("\n", "\r\n").encode())

for sse in [b": ping\n\nevent: message\nid: 7\nretry: 1000\ndata: x\nfoo: bar\n\n:\n\n",
            b"\xef\xbb\xbfdata: {\"a\":\ndata:1}\ndata\n\n", b"data: a\r\rdata: b\r\r",
            b"data: ok\n\ndata: \xff\xfe\ndata: more\n\ndata: after\n\ndata: [DONE]\n\n"]:
    write("sse_decoder", b"\x00\x01" + sse)
    write("sse_decoder", b"\x8f\x02" + sse)

frames = [
    {"type": "message", "version": "1.0", "timestamp": 1, "id": "chat", "messages": [], "trigger": "submit-message", "messageId": "m"},
    {"type": "tool_result", "version": "1.0", "toolCallId": "geo-1", "result": {"lat": 59.9}},
    {"type": "interrupt", "reason": "user_abort"},
    {"type": "interrupt"},
    {"type": "ping", "version": "1.0", "timestamp": 1700000000123},
    {"type": "ping", "timestamp": 12.5},
    {"type": "audio_chunk", "chunk": "AAAA", "sampleRate": 16000, "channels": 1, "bitDepth": 16},
    {"type": "audio_control", "action": "stop"},
    {"type": "resume", "id": "chat", "received": 42},
    {"type": "subscribe", "topic": "x"},
]
history = [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Pay Rin 25 EUR"}]},
    {"id": "a1", "role": "assistant", "metadata": None, "parts": [
        {"type": "step-start"},
        {"type": "tool-transfer_funds", "toolCallId": "c1", "state": "approval-responded",
         "input": {"amount": 25}, "approval": {"id": "ap1", "approved": True, "editedInput": {"amount": 20}}},
        {"type": "dynamic-tool", "toolName": "geo", "toolCallId": "c2", "state": "output-error",
         "input": None, "errorText": "no"},
        {"type": "reasoning", "id": "r", "text": "hm", "state": "done"},
        {"type": "data-weather", "id": "w", "data": {"t": -3.5}},
        {"type": "source-url", "sourceId": "s", "url": "https://example.test"},
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA"},
        {"type": "custom-part", "x": 1}]},
]
frames.append({"type": "message", "id": "chat-7", "messages": history, "trigger": "submit-message", "messageId": "a1"})
for frame in frames:
    write("ws_envelope", json.dumps(frame, separators=(",", ":")))
write("ws_envelope", json.dumps({"id": "chat-7", "messages": history, "trigger": "regenerate-message", "extra": {"x": True}}))

# ws_frame: masked client frames as a browser sends them. The first 8 bytes seed the read cuts.
def ws(opcode, payload, fin=True, key=b"\x37\xfa\x21\x3d"):
    if isinstance(payload, str):
        payload = payload.encode()
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))

hello = json.dumps(frames[0], separators=(",", ":"))
long_text = json.dumps(frames[-1], separators=(",", ":"))
write("ws_frame", b"\x01" * 8 + ws(0x1, hello))
write("ws_frame", b"\x05\x00\x00\x00\x00\x00\x00\x00" + ws(0x1, long_text[:300]))
write("ws_frame", b"\x09" * 8 + ws(0x1, "par", fin=False) + ws(0x9, "ping") + ws(0x0, "ts", fin=False) + ws(0x0, "!"))
write("ws_frame", b"\x02" * 8 + ws(0x2, bytes(range(40))) + ws(0xA, "") + ws(0x8, b"\x03\xe8bye"))
write("ws_frame", b"\x00" * 8 + ws(0x1, "x" * 600))
write("ws_frame", b"\x03" * 8 + ws(0x1, b"\xff\xfe"))
write("ws_frame", b"\x04" * 8 + ws(0x3, "reserved") + ws(0x8, b"\x03"))
write("ws_frame", b"\x06" * 8 + bytes([0x81, 0x05]) + b"hello")

# markdown: each byte picks one of src/targets/markdown.rs's PIECES (by index modulo their
# count). Sequences shaped like what models write, then a fixed pseudo-random spread.
PIECES = ["word", "other", " ", "  ", "**", "*", "_", "__", "~~", "`", "```", "[", "](https://x.test)",
    "]", "](/local \"title\")", "\n", "\n\n", "- ", "* ", "+ ", "1. ", "2) ", "> ", "# ", "## ",
    "|", "| --- |", "\\", "&amp;", "&#35;", "<", ">", "<https://a.test>", "    ", "\t", "---",
    "a_b", "3*4", "。", "日本", "!", "(", ")", "[ref]", "\n[ref]: https://r.test\n", "~~~",
    "<b>", "    code", "1.", "-"]
def md(*pieces):
    write("markdown", bytes(PIECES.index(p) for p in pieces))
md("# ", "word", "\n\n", "**", "word", "**", " ", "other")
md("- ", "word", "\n", "- ", "other", "\n", "  ", "- ", "word")
md("1. ", "word", "\n", "2) ", "other")
md("> ", "word", "\n", "> ", "- ", "other")
md("```", "\n", "    code", "\n", "```")
md("|", "word", "|", "\n", "| --- |", "\n", "|", "other", "|")
md("[", "word", "](https://x.test)", " ", "[ref]", "\n[ref]: https://r.test\n")
md("*", "word", " ", "__", "other", "__", "*", " ", "~~", "word", "~~")
md("`", "word", "`", " ", "&amp;", " ", "&#35;", " ", "<https://a.test>")
md("日本", "。", "**", "日本", "**", "\n", "a_b", " ", "3*4")
md("word", "  ", "\n", "other", "\\", "\n", "word")
md("---", "\n\n", "## ", "word", "\n", "    code")
state = 0x2545F4914F6CDD1D
for i in range(24):
    out = []
    for _ in range(1 + i * 2):
        state ^= (state << 13) & 0xFFFFFFFFFFFFFFFF
        state ^= state >> 7
        state ^= (state << 17) & 0xFFFFFFFFFFFFFFFF
        out.append(state % 256)
    write("markdown", bytes(out))
