//! `get_location`: the Geolocation API, after the person approved the call.

use serde_json::{Value, json};
use wasm_bindgen::{JsCast, closure::Closure};

/// A few cities, so the answer can name the place (nearest within 100 km).
const CITIES: &[(&str, f64, f64)] = &[
    ("Tokyo", 35.6762, 139.6503),
    ("Osaka", 34.6937, 135.5023),
    ("Kyoto", 35.0116, 135.7681),
    ("Paris", 48.8566, 2.3522),
    ("London", 51.5074, -0.1278),
    ("Berlin", 52.52, 13.405),
    ("New York", 40.7128, -74.006),
    ("San Francisco", 37.7749, -122.4194),
    ("Sydney", -33.8688, 151.2093),
    ("Seoul", 37.5665, 126.978),
];

fn nearest_city(lat: f64, lon: f64) -> Option<&'static str> {
    CITIES
        .iter()
        .map(|(name, clat, clon)| {
            // Haversine with the browser's Math (Rust's own trigonometry would add ~3.5 KB of
            // wasm for ten distances).
            use js_sys::Math::{asin, cos, sin, sqrt};
            let dlat = (lat - clat).to_radians();
            let dlon = (lon - clon).to_radians();
            let a = sin(dlat / 2.0).powi(2)
                + cos(lat.to_radians()) * cos(clat.to_radians()) * sin(dlon / 2.0).powi(2);
            (*name, 6371.0 * 2.0 * asin(sqrt(a)))
        })
        .filter(|(_, km)| *km < 100.0)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(name, _)| name)
}

/// The person's position, or the browser's refusal in words.
pub async fn locate() -> Result<Value, String> {
    let geolocation = web_sys::window()
        .ok_or("no window")?
        .navigator()
        .geolocation()
        .map_err(|_| "This browser has no Geolocation API.".to_string())?;
    let (tx, rx) = futures::channel::oneshot::channel::<Result<Value, String>>();
    let tx = std::rc::Rc::new(std::cell::RefCell::new(Some(tx)));
    let ok_tx = tx.clone();
    let success = Closure::once(move |position: web_sys::Position| {
        let c = position.coords();
        let (lat, lon) = (c.latitude(), c.longitude());
        let mut value = json!({
            "latitude": lat,
            "longitude": lon,
            "accuracy": c.accuracy(),
            "timestamp": position.timestamp(),
        });
        if let Some(city) = nearest_city(lat, lon) {
            value["city"] = json!(city);
        }
        if let Some(tx) = ok_tx.borrow_mut().take() {
            let _ = tx.send(Ok(value));
        }
    });
    let err_tx = tx.clone();
    let failure = Closure::once(move |error: web_sys::PositionError| {
        let message = match error.code() {
            1 => "The browser refused to share the location (permission denied).".to_string(),
            2 => "The browser could not determine the location.".to_string(),
            3 => "The browser took too long to determine the location.".to_string(),
            _ => format!("Geolocation failed: {}", error.message()),
        };
        if let Some(tx) = err_tx.borrow_mut().take() {
            let _ = tx.send(Err(message));
        }
    });
    let options = web_sys::PositionOptions::new();
    options.set_enable_high_accuracy(true);
    options.set_timeout(10_000);
    options.set_maximum_age(0);
    geolocation
        .get_current_position_with_error_callback_and_options(
            success.as_ref().unchecked_ref(),
            Some(failure.as_ref().unchecked_ref()),
            &options,
        )
        .map_err(|_| "Geolocation could not start.".to_string())?;
    let result = rx
        .await
        .unwrap_or_else(|_| Err("Geolocation was cancelled.".into()));
    drop(success);
    drop(failure);
    result
}
