#!/usr/bin/env python3
"""Generates the two background-music loops in public/bgm/ (synthesised tones, no samples).

Deterministic: re-running writes the same bytes. 11025 Hz, 16-bit mono, 4 s each (~88 KB).
Track 1: a bright major arpeggio. Track 2: a slow minor pad.
"""
import math
import struct
import wave
from pathlib import Path

RATE = 11025
SECONDS = 4.0
OUT = Path(__file__).resolve().parent.parent / "public" / "bgm"


def note(freq: float, t: float, length: float) -> float:
    """A sine with a short attack and an exponential decay (a soft bell)."""
    if t < 0 or t > length:
        return 0.0
    attack = min(1.0, t / 0.02)
    decay = math.exp(-3.0 * t / length)
    return attack * decay * (math.sin(2 * math.pi * freq * t) + 0.3 * math.sin(4 * math.pi * freq * t))


def track1(t: float) -> float:
    notes = [261.63, 329.63, 392.00, 493.88, 523.25, 493.88, 392.00, 329.63]
    step = SECONDS / len(notes)
    i = int(t // step) % len(notes)
    return 0.5 * note(notes[i], t - i * step, step * 1.5)


def track2(t: float) -> float:
    chord = [220.00, 261.63, 329.63]
    swell = 0.5 - 0.5 * math.cos(2 * math.pi * t / SECONDS)
    return 0.22 * swell * sum(math.sin(2 * math.pi * f * t + k) for k, f in enumerate(chord))


def write(name: str, fn) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    frames = bytearray()
    for n in range(int(RATE * SECONDS)):
        v = max(-1.0, min(1.0, fn(n / RATE)))
        frames += struct.pack("<h", int(v * 32000))
    with wave.open(str(OUT / name), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(bytes(frames))


if __name__ == "__main__":
    write("track1.wav", track1)
    write("track2.wav", track2)
    print(f"wrote {OUT}/track1.wav and track2.wav")
