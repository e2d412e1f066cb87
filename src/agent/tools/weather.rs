//! `get_weather(location)`: a real keyless lookup (Open-Meteo geocoding + current forecast) with a
//! short timeout, and a deterministic offline table when the network does not answer. The
//! result always says which source answered.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    ApprovalPolicy, ServerTool, ToolContext, ToolEffects, ToolError, ToolLocation, ToolSettings,
    ToolSpec,
};
use crate::protocol::ToolPresentation;

/// Where weather comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum WeatherSource {
    /// The built-in table only (tests, air-gapped machines).
    Offline,
    /// Open-Meteo first (base URLs overridable for proxies and tests), the table as fallback.
    OpenMeteo {
        geocoding_url: String,
        forecast_url: String,
        timeout: Duration,
    },
}

impl WeatherSource {
    pub fn open_meteo() -> Self {
        WeatherSource::OpenMeteo {
            geocoding_url: "https://geocoding-api.open-meteo.com/v1/search".into(),
            forecast_url: "https://api.open-meteo.com/v1/forecast".into(),
            timeout: Duration::from_secs(3),
        }
    }
}

/// The `get_weather` tool.
pub struct WeatherTool {
    source: WeatherSource,
    client: Option<reqwest::Client>,
}

impl WeatherTool {
    pub fn new(source: WeatherSource) -> Self {
        let client = match &source {
            WeatherSource::Offline => None,
            WeatherSource::OpenMeteo { timeout, .. } => reqwest::Client::builder()
                .timeout(*timeout)
                .connect_timeout(*timeout)
                .user_agent(concat!("countersign/", env!("CARGO_PKG_VERSION")))
                .build()
                .ok(),
        };
        WeatherTool { source, client }
    }

    pub fn spec(_settings: &ToolSettings) -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "Get the current weather for a city. Pass the city name in English \
                          (e.g. \"Tokyo\", not \"東京\")."
                .into(),
            purpose: "check the weather".into(),
            presentation: ToolPresentation::new("Weather", "Look up the weather in {location}")
                .label("temperature_c", "temperature (°C)")
                .label("humidity", "humidity (%)")
                .label("wind_kmh", "wind (km/h)")
                .label("observed_at", "observed at"),
            parameters: json!({
                "type": "object",
                "properties": {
                    "location": {"type": "string", "minLength": 1, "maxLength": 100,
                                 "description": "City name in English."}
                },
                "required": ["location"],
                "additionalProperties": false
            }),
            location: ToolLocation::Server,
            approval: ApprovalPolicy::Never,
            approval_timeout: Duration::from_secs(300),
            result_timeout: Duration::from_secs(30),
            acknowledgment: None,
            server: None,
            pays: None,
            names: vec!["location".into()],
            effects: ToolEffects::External,
        }
    }

    async fn open_meteo(
        &self,
        client: &reqwest::Client,
        geocoding_url: &str,
        forecast_url: &str,
        location: &str,
    ) -> Result<Value, String> {
        let geo: Value = client
            .get(geocoding_url)
            .query(&[
                ("name", location),
                ("count", "1"),
                ("language", "en"),
                ("format", "json"),
            ])
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let place = geo["results"]
            .get(0)
            .ok_or_else(|| format!("no place called {location:?}"))?;
        let (Some(lat), Some(lon)) = (place["latitude"].as_f64(), place["longitude"].as_f64())
        else {
            return Err("the geocoder returned no coordinates".into());
        };
        let forecast: Value = client
            .get(forecast_url)
            .query(&[
                ("latitude", lat.to_string()),
                ("longitude", lon.to_string()),
                (
                    "current",
                    "temperature_2m,relative_humidity_2m,weather_code,wind_speed_10m".to_string(),
                ),
            ])
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let current = &forecast["current"];
        let temperature = current["temperature_2m"]
            .as_f64()
            .ok_or("the forecast has no temperature")?;
        Ok(json!({
            "location": place["name"].as_str().unwrap_or(location),
            "country": place["country"].as_str(),
            "latitude": lat,
            "longitude": lon,
            "temperature_c": temperature,
            "condition": wmo_condition(current["weather_code"].as_i64().unwrap_or(-1)),
            "humidity": current["relative_humidity_2m"].as_f64(),
            "wind_kmh": current["wind_speed_10m"].as_f64(),
            "observed_at": current["time"].as_str(),
            "source": "open-meteo",
        }))
    }
}

#[async_trait]
impl ServerTool for WeatherTool {
    async fn call(&self, args: Value, _ctx: ToolContext) -> Result<Value, ToolError> {
        let location = args["location"].as_str().unwrap_or_default().trim();
        if location.is_empty() {
            return Err(ToolError("location must not be empty".into()));
        }
        let online_error = match (&self.source, &self.client) {
            (
                WeatherSource::OpenMeteo {
                    geocoding_url,
                    forecast_url,
                    ..
                },
                Some(client),
            ) => match self
                .open_meteo(client, geocoding_url, forecast_url, location)
                .await
            {
                Ok(result) => return Ok(result),
                Err(e) => {
                    tracing::info!(location, error = %e, "Open-Meteo did not answer; using the offline table");
                    Some(e)
                }
            },
            _ => None,
        };
        match offline_weather(location) {
            Some(mut result) => {
                if let Some(e) = online_error {
                    result["note"] = json!(format!(
                        "Open-Meteo was unavailable ({e}); offline table used."
                    ));
                }
                Ok(result)
            }
            None => Err(ToolError(format!(
                "No weather for {location:?}: the live service is unavailable and the offline \
                 table knows only {}.",
                OFFLINE.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

/// (city, country, °C, condition, humidity %, wind km/h): fixed, plausible values.
const OFFLINE: &[(&str, &str, f64, &str, u32, f64)] = &[
    ("Tokyo", "Japan", 18.0, "Partly cloudy", 62, 11.0),
    ("Osaka", "Japan", 19.5, "Sunny", 55, 9.0),
    ("Kyoto", "Japan", 17.0, "Light rain", 78, 6.0),
    ("Sapporo", "Japan", 9.0, "Overcast", 70, 14.0),
    ("Paris", "France", 14.0, "Light rain", 81, 13.0),
    ("London", "United Kingdom", 12.0, "Overcast", 77, 18.0),
    ("Berlin", "Germany", 11.0, "Cloudy", 68, 15.0),
    ("New York", "United States", 16.0, "Clear", 52, 12.0),
    ("San Francisco", "United States", 15.0, "Fog", 84, 19.0),
    ("Los Angeles", "United States", 23.0, "Sunny", 40, 8.0),
    ("Sydney", "Australia", 21.0, "Sunny", 58, 17.0),
    ("Seoul", "South Korea", 15.0, "Clear", 45, 10.0),
    ("Beijing", "China", 13.0, "Haze", 50, 7.0),
    ("Singapore", "Singapore", 30.0, "Thunderstorms", 85, 9.0),
    ("Toronto", "Canada", 10.0, "Cloudy", 63, 16.0),
];

/// The offline table's answer for `location` (case-insensitive), if it knows the city.
pub fn offline_weather(location: &str) -> Option<Value> {
    let wanted = location.trim();
    OFFLINE
        .iter()
        .find(|c| c.0.eq_ignore_ascii_case(wanted))
        .map(|&(city, country, temperature, condition, humidity, wind)| {
            json!({
                "location": city,
                "country": country,
                "temperature_c": temperature,
                "condition": condition,
                "humidity": humidity,
                "wind_kmh": wind,
                "source": "offline",
            })
        })
}

/// WMO weather interpretation codes (Open-Meteo `weather_code`) in words.
fn wmo_condition(code: i64) -> &'static str {
    match code {
        0 => "Clear",
        1 => "Mainly clear",
        2 => "Partly cloudy",
        3 => "Overcast",
        45 | 48 => "Fog",
        51 | 53 | 55 => "Drizzle",
        56 | 57 => "Freezing drizzle",
        61 | 63 => "Rain",
        65 => "Heavy rain",
        66 | 67 => "Freezing rain",
        71 | 73 | 75 | 77 => "Snow",
        80..=82 => "Rain showers",
        85 | 86 => "Snow showers",
        95 => "Thunderstorms",
        96 | 99 => "Thunderstorms with hail",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{
        clock::{SequentialIds, SystemClock},
        session::{Session, SessionRecord},
    };
    use axum::{Json, Router, extract::Query, routing::get};
    use std::{collections::HashMap, sync::Arc};

    fn ctx() -> ToolContext {
        ToolContext {
            session: Arc::new(Session::new(SessionRecord::new("s", 0))),
            tool: "get_weather".into(),
            tool_call_id: "c".into(),
            clock: Arc::new(SystemClock),
            ids: Arc::new(SequentialIds::default()),
            asker: None,
        }
    }

    #[tokio::test]
    async fn offline_table_answers_known_cities_and_says_so() {
        let tool = WeatherTool::new(WeatherSource::Offline);
        let out = tool
            .call(json!({"location": "tokyo"}), ctx())
            .await
            .unwrap();
        assert_eq!(out["location"], "Tokyo");
        assert_eq!(out["source"], "offline");
        let err = tool
            .call(json!({"location": "Atlantis"}), ctx())
            .await
            .unwrap_err();
        assert!(
            err.0.contains("Atlantis") && err.0.contains("Tokyo"),
            "{err}"
        );
    }

    /// An in-process fake of Open-Meteo's two endpoints, speaking its JSON.
    async fn fake_open_meteo() -> String {
        let app = Router::new()
            .route(
                "/v1/search",
                get(|Query(q): Query<HashMap<String, String>>| async move {
                    if q.get("name").map(String::as_str) == Some("Nowhere") {
                        return Json(json!({"generationtime_ms": 0.1}));
                    }
                    Json(
                        json!({"results": [{"name": "Reykjavík", "country": "Iceland",
                                              "latitude": 64.1, "longitude": -21.9}]}),
                    )
                }),
            )
            .route(
                "/v1/forecast",
                get(|Query(q): Query<HashMap<String, String>>| async move {
                    assert_eq!(q.get("latitude").map(String::as_str), Some("64.1"));
                    Json(
                        json!({"current": {"time": "2026-11-22T10:00", "temperature_2m": -1.5,
                                             "relative_humidity_2m": 88, "weather_code": 73,
                                             "wind_speed_10m": 31.0}}),
                    )
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn open_meteo_answers_are_mapped_and_labelled() {
        let base = fake_open_meteo().await;
        let tool = WeatherTool::new(WeatherSource::OpenMeteo {
            geocoding_url: format!("{base}/v1/search"),
            forecast_url: format!("{base}/v1/forecast"),
            timeout: Duration::from_secs(5),
        });
        let out = tool
            .call(json!({"location": "Reykjavik"}), ctx())
            .await
            .unwrap();
        assert_eq!(out["source"], "open-meteo");
        assert_eq!(out["location"], "Reykjavík");
        assert_eq!(out["temperature_c"], -1.5);
        assert_eq!(out["condition"], "Snow");
        assert_eq!(out["humidity"], 88.0);
    }

    #[tokio::test]
    async fn an_unreachable_service_falls_back_to_the_table_with_a_note() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let tool = WeatherTool::new(WeatherSource::OpenMeteo {
            geocoding_url: format!("{dead}/v1/search"),
            forecast_url: format!("{dead}/v1/forecast"),
            timeout: Duration::from_secs(2),
        });
        let out = tool
            .call(json!({"location": "Paris"}), ctx())
            .await
            .unwrap();
        assert_eq!(out["source"], "offline");
        assert!(
            out["note"]
                .as_str()
                .unwrap()
                .contains("Open-Meteo was unavailable")
        );
    }

    #[tokio::test]
    async fn an_unknown_place_online_still_tries_the_table() {
        let base = fake_open_meteo().await;
        let tool = WeatherTool::new(WeatherSource::OpenMeteo {
            geocoding_url: format!("{base}/v1/search"),
            forecast_url: format!("{base}/v1/forecast"),
            timeout: Duration::from_secs(5),
        });
        let err = tool
            .call(json!({"location": "Nowhere"}), ctx())
            .await
            .unwrap_err();
        assert!(err.0.contains("Nowhere"));
    }
}
