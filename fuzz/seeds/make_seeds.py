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

for target in ("sse_decoder", "chunk_decode", "ws_envelope"):
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
