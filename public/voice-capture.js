// Countersign's microphone (ADR 0037): on the audio thread, collect the microphone's samples
// (16 kHz mono) and post them to the page in batches; the page turns them into PCM16 in Rust.
// "flush" posts what is left, then "flushed". Rust cannot run in a worklet on stable (ADR 0037).
class CountersignCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.batch = new Float32Array(options.processorOptions.batch);
    this.filled = 0;
    this.port.onmessage = () => { this.post(); this.port.postMessage('flushed'); };
  }
  post() {
    if (this.filled > 0) this.port.postMessage(this.batch.slice(0, this.filled));
    this.filled = 0;
  }
  process(inputs) {
    const samples = inputs[0] && inputs[0][0];
    for (let i = 0; samples && i < samples.length;) {
      const n = Math.min(samples.length - i, this.batch.length - this.filled);
      this.batch.set(samples.subarray(i, i + n), this.filled);
      this.filled += n;
      i += n;
      if (this.filled === this.batch.length) this.post();
    }
    return true;
  }
}
registerProcessor('countersign-capture', CountersignCapture);
