//! Percentiles of latency samples (milliseconds), nearest-rank.

use serde_json::{Value, json};

/// `{n, min, p50, p90, p99, max, mean}` of `samples` (ms, rounded to µs); `{n: 0}` when empty.
pub fn summary(samples: &[f64]) -> Value {
    if samples.is_empty() {
        return json!({ "n": 0 });
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pick = |p: f64| {
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    };
    let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
    json!({
        "n": sorted.len(),
        "min": round(sorted[0]),
        "p50": round(pick(50.0)),
        "p90": round(pick(90.0)),
        "p99": round(pick(99.0)),
        "max": round(sorted[sorted.len() - 1]),
        "mean": round(mean),
    })
}

pub fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summary(&samples);
        assert_eq!(s["p50"], 50.0);
        assert_eq!(s["p99"], 99.0);
        assert_eq!(s["max"], 100.0);
        assert_eq!(summary(&[3.0])["p99"], 3.0);
    }
}
